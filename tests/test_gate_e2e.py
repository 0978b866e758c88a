"""End-to-end: the shipped sharktank-format benchmarks in the pipeline, with dispatch and
size checks against their goldens, then bless, the gate target and `benchflow check`."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FAST_MEASUREMENT, fast_bench_files, snakemake, write_suite
from tests.test_e2e import job_counts, read_report
from workflow.cli.main import main

pytestmark = pytest.mark.e2e

LINEAR = "host/iree/linear-16x32x32-f32/baseline"
MATMUL = "host/iree/tiny_mlp.matmul_cpu/baseline"
MLP = "host/iree/tiny_mlp.mlp_cpu/baseline"
BENCH_IDS = {MATMUL, MLP, "host/iree/tiny_pipeline.pipeline_cpu/baseline",
             "host/iree/tiny_pipeline.scale_cpu/baseline"}


def suite(workdir) -> dict:
    # Four invocations: the fewest with which 4 vs 4 medians can reach p < 0.05 (1/70).
    # noisy_cv is high so that a shared machine's noise cannot turn the injected
    # regression below into `inconclusive`: that path has its unit tests.
    m = {**FAST_MEASUREMENT, "invocations": 4, "noisy_cv": 5.0}
    return {
        "suite_name": "gate",
        # The shipped files hold goldens for the default suite's cpu-host SKU.
        "skus": {"host": {"iree": {"target_cpu": "host"}, "measurement": m}},
        "workloads": [{"model": "linear", "shapes": [[16, 32, 32]]}],
        "benchmark_files": {"dir": str(workdir / "benchmarks"), "models": ["tiny_*"],
                            "golden_keys": {"host": "cpu-host"}},
    }


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    wd = tmp_path_factory.mktemp("gate")
    # A copy, so that tests can edit the files' goldens; their own repetitions, a short
    # warm-up (0.5 s each of 16 invocations otherwise: no assertion judges a time against
    # the files' goldens beyond its having a verdict).
    fast_bench_files(wd / "benchmarks", own_repetitions=True)
    write_suite(wd / "suite.yaml", suite(wd))
    run(wd, "results/report.json")
    return wd


def run(wd, target, check=True):
    return snakemake(wd, target, "--configfile", str(wd / "suite.yaml"), check=check)


def cases(wd) -> dict:
    return {c["id"]: c for c in read_report(wd)["cases"]}


def edit(path, fn):
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data, indent=4))


def test_shipped_benchmarks_run_with_dispatch_and_size_checks(workdir):
    by_id = cases(workdir)
    assert set(by_id) == BENCH_IDS | {LINEAR}
    for cid in BENCH_IDS:
        c = by_id[cid]
        assert c["status"] == "ok", c["error"]
        g = c["golden"]
        assert g["source"].endswith(cid.split("/")[2].replace(".", "/") + ".json")
        # Deterministic for a compiler version: the recorded goldens hold here.
        assert g["dispatch_verdict"] == "pass" and g["dispatch_ratio"] == 1.0
        assert g["size_verdict"] == "pass" and 0.9 < g["size_ratio"] <= 1.0
        # Time against the file's single golden number: a verdict, its ratio and p.
        assert g["verdict"] in ("pass", "regression", "improvement", "inconclusive")
        assert g["ratio"] > 0 and 0 < g["p_value"] <= 1
        assert g["test"] == "wilcoxon-signed-rank-exact"
    mlp = by_id[MLP]
    assert mlp["compile"]["dispatch_count"] == 2 and mlp["timing"]["repetitions"] == 10
    assert "--parameters=model=" + str(workdir / "benchmarks/tiny_mlp/mlp_weights.irpa") in \
        json.loads((workdir / "results/bench_files/run/host/tiny_mlp.mlp_cpu/timing.json")
                   .read_text())["command"]
    assert by_id[LINEAR]["golden"]["verdict"] == "no-golden"


def test_changed_file_goldens_rerun_only_case_steps_and_fail_the_gate(workdir, capsys):
    bench = workdir / "benchmarks"
    edit(bench / "tiny_mlp/matmul_cpu.json", lambda d: d["golden_dispatch"].update(
        {"cpu-host": 0}))
    edit(bench / "tiny_mlp/mlp_cpu.json", lambda d: d["golden_size"].update({"cpu-host": 1000}))
    # The run's own plan (its "Job stats", printed before any job) says what it reruns:
    # one snakemake process instead of a dry run and then the run.
    rerun = run(workdir, "results/report.json")  # a regression never fails the report
    assert job_counts(rerun) == {"case_bench_file": 2, "report": 1}
    by_id = cases(workdir)
    assert by_id[MATMUL]["golden"]["dispatch_verdict"] == "regression"
    assert by_id[MLP]["golden"]["size_verdict"] == "regression"
    # No goldens directory yet, and LINEAR has no golden of a benchmark file: the gate is
    # refused before any job (it measured, then failed on the directory).
    gate = run(workdir, "results/gate.json", check=False)
    assert gate.returncode == 2 and "goldens.dir: goldens: no such directory" in gate.stderr
    assert f"e.g. {LINEAR}" in gate.stderr and "Traceback" not in gate.stderr
    (workdir / "goldens").mkdir()  # empty: LINEAR is no-golden, counted as ok
    try:
        gate = run(workdir, "results/gate.json", check=False)
    finally:
        (workdir / "goldens").rmdir()  # the next test blesses into it
    assert gate.returncode != 0 and not (workdir / "results/gate.json").exists()
    text = gate.stdout + gate.stderr
    assert f"{MATMUL}: dispatch" in text and f"{MLP}: " in text
    assert "size x" in text and "Traceback" not in text
    assert main(["check", "--report", str(workdir / "results/report.json")]) == 1
    out = capsys.readouterr().out
    assert f"REGRESSED {MATMUL}" in out and f"REGRESSED {MLP}" in out


def test_blessed_goldens_pass_the_gate_until_a_real_regression(workdir, capsys):
    gdir = workdir / "goldens"
    report = str(workdir / "results/report.json")
    assert main(["bless", "--report", report, "--goldens", str(gdir)]) == 0
    assert not gdir.exists()  # a dry run
    # --allow-noisy: a case this loaded machine measured noisy is still a golden here.
    # --numbers-only: the slowdown below is the goldens' edit, not the code's; a golden
    # that keeps its baseline would call the case unchanged since blessed and its time
    # the machine's drift (tests/test_paired_baselines.py). These tests judge numbers.
    assert main(["bless", "--report", report, "--goldens", str(gdir), "--yes",
                 "--allow-noisy", "--numbers-only"]) == 0
    # Blessing re-judges, never re-measures: the benchmark files' case steps and the
    # report (which judges the IREE cases) rerun, no IREE batch; then the gate rule. (The
    # gate run's own plan, not a dry run before it: one snakemake process fewer.)
    gated = run(workdir, "results/gate.json")
    assert job_counts(gated) == {"case_bench_file": 4, "report": 1, "gate": 1}
    gate = json.loads((workdir / "results/gate.json").read_text())
    assert gate["passed"] and gate["time_verdicts"] == {"pass": 5}
    for c in cases(workdir).values():
        assert c["golden"]["source"] == "goldens/host.json"  # the suite's goldens.dir
        assert c["golden"]["test"] == "mann-whitney-exact" and c["golden"]["ratio"] == 1.0
    # A real slowdown, as seen from the goldens: they claim 20x faster invocations. (20x,
    # not less: these 3-invocation cases reach a CV of 70 % on a loaded 2-core machine,
    # and a noisy case is judged a regression only when its samples are apart.)
    edit(gdir / "host.json", lambda d: d["cases"][LINEAR].update(
        invocation_medians_ms=[x / 20 for x in d["cases"][LINEAR]["invocation_medians_ms"]],
        median_ms=d["cases"][LINEAR]["median_ms"] / 20))
    gate = run(workdir, "results/gate.json", check=False)
    assert gate.returncode != 0 and f"{LINEAR}: time regressed" in gate.stdout + gate.stderr
    g = cases(workdir)[LINEAR]["golden"]
    assert g["verdict"] == "regression" and g["ratio"] == pytest.approx(20.0)
    assert g["p_value"] == pytest.approx(1 / 70)
    assert main(["check", "--report", report]) == 1
    assert f"REGRESSED {LINEAR}: time regressed" in capsys.readouterr().out


def test_an_inconclusive_case_fails_the_gate_until_measured_again(workdir, capsys,
                                                                   monkeypatch):
    """Issue 20: an inconclusive case is not a pass. The gate rule fails on it; `check`
    exits 3 without re-measuring, and with its default budget measures the real module
    again (the run stage's command, inputs written again) and judges the new invocations."""
    gdir = workdir / "goldens"

    def two_invocations(d):
        # Two golden invocations (20x faster, from the test above): 4 against 2 cannot
        # reach p < 0.05 (the smallest p is 1/15), so the verdict is inconclusive.
        entry = d["cases"][LINEAR]
        entry["invocation_medians_ms"] = entry["invocation_medians_ms"][:2]
        entry["median_ms"] = sum(entry["invocation_medians_ms"]) / 2

    edit(gdir / "host.json", two_invocations)
    # The gate run remakes the report from the edited goldens (its input) before the gate
    # rule fails: the report's verdict is read from that run, not from one of its own.
    gate = run(workdir, "results/gate.json", check=False)
    assert job_counts(gate).get("report") == 1, gate.stderr
    assert cases(workdir)[LINEAR]["golden"]["verdict"] == "inconclusive"
    text = gate.stdout + gate.stderr
    assert gate.returncode != 0 and "could not judge:" in text
    assert f"{LINEAR}: inconclusive: would be regression" in text
    assert not (workdir / "results/gate.json").exists()
    monkeypatch.chdir(workdir)  # where results/ is: the re-measure reads the run's files
    report = "results/report.json"
    capsys.readouterr()
    assert main(["check", "--report", report, "--remeasure-budget", "0"]) == 3
    assert f"COULD NOT JUDGE {LINEAR}: inconclusive" in capsys.readouterr().out
    assert main(["check", "--report", report, "--remeasure-budget", "0",
                 "--allow-inconclusive"]) == 0
    capsys.readouterr()
    # 5 new invocations: as many as 5 against 2 need to reach p < 0.05 (1/21).
    code = main(["check", "--report", report])
    out = capsys.readouterr().out
    assert code == 1, out  # what the re-measure said, where it did not regress
    assert f"REMEASURED {LINEAR}: inconclusive -> regression: 5 new invocations" in out
    assert f"REGRESSED {LINEAR}: time regressed" in out
