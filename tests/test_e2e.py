"""End-to-end: real snakemake runs of a tiny suite in a temporary directory."""

from __future__ import annotations

import contextlib
import json
import os
import re

import jsonschema
import pytest

from tests.conftest import DATA, snakemake, tiny_suite, write_suite
from tests.shared_runs import copy_suite_dir, settle, up_to_date
from workflow.records.report import report_schema

pytestmark = pytest.mark.e2e


def read_report(workdir):
    return json.loads((workdir / "results" / "report.json").read_text())


def job_counts(proc) -> dict[str, int]:
    """The 'Job stats' table of a snakemake (dry) run: rule -> job count."""
    counts = {}
    text = proc.stdout + proc.stderr
    if "Job stats:" not in text:
        return counts
    table = text.split("Job stats:", 1)[1]
    for line in table.splitlines()[3:]:
        m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if not m:
            break
        counts[m.group(1)] = int(m.group(2))
    counts.pop("total", None)
    return counts


def mtimes(workdir) -> dict[str, int]:
    return {str(p.relative_to(workdir)): p.stat().st_mtime_ns
            for p in (workdir / "results").rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One tiny suite, run once; tests that change it work on copies of its state."""
    workdir = tmp_path_factory.mktemp("suite")
    write_suite(workdir / "suite.yaml", tiny_suite())
    run_finished(workdir)
    up_to_date(workdir)
    return workdir


def run_finished(workdir, *args: str):
    return snakemake(workdir, "results/report.json", "--configfile",
                     str(workdir / "suite.yaml"), *args)


def test_report_is_schema_valid_and_complete(finished):
    report = read_report(finished)
    jsonschema.Draft202012Validator(report_schema()).validate(report)
    assert report["schema_version"].startswith("1.")
    assert report["provenance"]["versions"]["iree-base-compiler"]
    ids = sorted(c["id"] for c in report["cases"])
    assert ids == sorted(f"{sku}/iree/{w}/baseline" for sku in ("host", "generic")
                         for w in ("linear-16x32x32-f32", "ln_linear_relu-16x32x64-f32"))
    for case in report["cases"]:
        assert case["status"] == "ok", case
        assert case["compile"]["dispatch_count"] >= 1
        assert case["compile"]["binary_bytes"] > 0
        t = case["timing"]
        assert t["invocations"] >= 3 and len(t["invocation_medians_ms"]) == t["invocations"]
        assert t["stop_reason"] == "fixed"
        if t["invocations"] < 6:  # 3, not noisy: no interval reaches 95 %, none is claimed
            assert t["ci95_ms"] is None and t["ci_level"] is None
        else:  # 6 after a noisy rerun: the interval and its exact coverage (96.9 %)
            assert t["ci95_ms"][0] <= t["median_ms"] <= t["ci95_ms"][1]
            assert t["ci_level"] == pytest.approx(1 - 2 / 64)
        assert 0 <= t["cv"] < 5 and t["repetitions"] == 3
        assert case["accuracy"]["pcc"] >= 0.999 and case["accuracy"]["allclose"]
        assert case["graph"]["aten_ops"] >= 1
        assert case["golden"]["verdict"] == "no-golden"
        assert case["throughput"]["gflops"] > 0
        assert case["memory"]["peak_bytes"] > 0 and case["memory"]["kind"] == "rss"


def test_a_shared_run_is_settled_only_when_a_test_left_it_changed(tmp_path):
    """tests/shared_runs.settle: the settling run is skipped only after a test said the
    directory is up to date, and a test that goes on to change it takes that back (so a
    failure midway makes the next test settle it)."""
    runs = []
    settle(tmp_path, lambda: runs.append("first"))  # never said up to date
    settle(tmp_path, lambda: runs.append("after a change"))
    up_to_date(tmp_path)
    settle(tmp_path, lambda: runs.append("not needed"), changes=False)
    settle(tmp_path, lambda: runs.append("still not needed"))
    settle(tmp_path, lambda: runs.append("changed since"))
    assert runs == ["first", "after a change", "changed since"]


def test_second_run_does_nothing(finished):
    proc = snakemake(finished, "results/report.json", "--configfile", str(finished / "suite.yaml"))
    assert "Nothing to be done" in proc.stdout + proc.stderr
    up_to_date(finished)


@contextlib.contextmanager
def edited_suite(workdir, suite: dict):
    """The suite file of `workdir` edited to `suite` (the same suite, changed: a copy
    under another name would be another suite, refused in this suite's directory), then
    restored for the tests after."""
    path = workdir / "suite.yaml"
    original = path.read_text()
    write_suite(path, suite)
    try:
        yield path
    finally:
        path.write_text(original)


def test_changed_flag_reruns_exactly_that_skus_jobs(finished, tmp_path):
    # On a copy of the shared run (with the shared suite file, edited then restored):
    # the tests after it start from the suite as it was, not from one whose generic SKU
    # they would have to measure again.
    settle(finished, lambda: run_finished(finished), changes=False)
    work = copy_suite_dir(finished, tmp_path / "suite")
    suite = tiny_suite()
    suite["skus"]["generic"]["iree"]["compile_flags"] = ["--iree-opt-level=O1"]
    with edited_suite(finished, suite) as changed:
        dry = snakemake(work, "-n", "results/report.json", "--configfile", str(changed))
        assert job_counts(dry) == {"iree_batch": 1, "report": 1}
        assert "output: results/iree/host" not in dry.stdout
        before = mtimes(work)
        snakemake(work, "results/report.json", "--configfile", str(changed))
        after = mtimes(work)
    rewritten = {p for p in after if after[p] != before.get(p)}
    # That SKU's compiles, runs, verifications and cases; the exports are reused.
    assert rewritten and all(p.startswith(("results/compile/generic", "results/run/generic",
                                           "results/verify/generic", "results/cases/generic",
                                           "results/iree/generic", "results/report.json"))
                             for p in rewritten), rewritten
    assert any(p.startswith("results/compile/generic") for p in rewritten)
    report = read_report(work)
    flags = {c["sku"]: c["compile"]["flags"] for c in report["cases"]}
    assert flags["generic"][-1] == "--iree-opt-level=O1"
    assert "--iree-opt-level=O1" not in flags["host"]


def fake_version(tmp_path, dist: str, version: str) -> dict:
    """An environment in which importlib.metadata reports another version of `dist`,
    as after an upgrade, so that the rerun rule is exercised for real."""
    site = tmp_path / f"fake-{dist}"
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    return {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def test_a_compiler_or_torch_upgrade_reruns_every_batch(
        finished, tmp_path):
    suite = str(finished / "suite.yaml")
    settle(finished, lambda: run_finished(finished), changes=False)  # dry runs only below
    for dist in ("iree-base-compiler", "torch"):
        dry = snakemake(finished, "-n", "results/report.json", "--configfile", suite,
                        env=fake_version(tmp_path, dist, "99.0.0"))
        # Every batch reruns; in it, every case's key changes (jobs/iree.job_key) and
        # so does every export's (the FX importer ships in iree-base-compiler).
        assert job_counts(dry)["iree_batch"] == 2, dry.stdout


def test_adding_a_workload_measures_it_alone_and_forcing_measures_all(finished):
    suite = tiny_suite()
    suite["workloads"].append({"model": "linear", "shapes": [[8, 16, 16]]})
    settle(finished, lambda: run_finished(finished))
    # Forcing the batches re-measures every case of them: the suite's own four, forced
    # before the workload is added (the two cases more would only cost their seconds).
    before = mtimes(finished)
    run_finished(finished, "--forcerun", "iree_batch")
    after = mtimes(finished)
    assert all(after[p] != before[p] for p in after if p.startswith("results/cases/"))
    with edited_suite(finished, suite) as grown:
        before = mtimes(finished)
        snakemake(finished, "results/report.json", "--configfile", str(grown))
        after = mtimes(finished)
    rewritten = {p for p in after if after[p] != before.get(p)}
    new = "linear-8x16x16-f32"
    cases = {p for p in rewritten if p.startswith("results/cases/")}
    assert cases == {f"results/cases/{sku}/iree/{new}/baseline.json"
                     for sku in ("host", "generic")}, rewritten
    assert not any(p.startswith("results/export/") and new not in p for p in rewritten)
    log = (finished / "logs" / "iree" / "host" / "b0.log").read_text()
    assert "host/iree/linear-16x32x32-f32/baseline: reused" in log
    assert f"host/iree/{new}/baseline: measuring" in log
    assert len(read_report(finished)["cases"]) == 6


def test_a_model_that_fails_to_compile_is_a_failed_case(tmp_path):
    suite = tiny_suite(
        model_modules=[str(DATA / "extra_models.py")],
        workloads=[{"model": "linear", "shapes": [[8, 16, 16]]}, {"model": "histc_model"}],
    )
    suite["skus"].pop("generic")
    write_suite(tmp_path / "suite.yaml", suite)
    snakemake(tmp_path, "results/report.json", "--configfile", str(tmp_path / "suite.yaml"))
    cases = {c["model"]: c for c in read_report(tmp_path)["cases"]}
    failed = cases["histc_model"]
    assert failed["status"] == "failed" and failed["stage"] == "compile"
    assert "aten.histc" in failed["error"] and "iree-compile exited" in failed["error"]
    assert failed["graph"]["op_histogram"] == {"aten.histc.default": 1}
    assert failed["timing"] is None and failed["accuracy"] is None
    assert cases["linear"]["status"] == "ok"


def test_a_timeout_is_recorded_as_a_failure(tmp_path):
    suite = tiny_suite(timeouts={"compile_s": 0.01}, workloads=[{"model": "linear"}])
    suite["skus"].pop("generic")
    write_suite(tmp_path / "suite.yaml", suite)
    snakemake(tmp_path, "results/report.json", "--configfile", str(tmp_path / "suite.yaml"))
    (case,) = read_report(tmp_path)["cases"]
    assert case["status"] == "failed" and case["stage"] == "compile"
    assert case["error"].startswith("timeout after 0.01 s")


def test_a_bad_config_is_refused_before_any_job(tmp_path):
    bad = tiny_suite()
    bad["skus"]["host"]["measurement"]["invocations"] = "many"
    path = write_suite(tmp_path / "bad.yaml", bad)
    proc = snakemake(tmp_path, "results/report.json", "--configfile", str(path), check=False)
    assert proc.returncode != 0
    assert f"{path}: skus.host.measurement.invocations: expected integer, got str 'many'" \
        in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (tmp_path / "results").exists()
