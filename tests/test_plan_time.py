"""A plan's time said before it runs (planning/plan_time.py): estimated from each case's
FLOPs at this machine's peak and from its earlier record, shown by `benchflow list` and
`snakemake -n`; a run above the threshold asks in a terminal and needs
BENCHFLOW_CONFIRMED=1 elsewhere. A 16384x8192x8192 matmul is not a second's work."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from tests.conftest import REPO, snakemake, tiny_suite, write_suite
from workflow.errors import ConfigError
from workflow.planning import plan_time
from workflow.suite.load import load

PEAK = (100.0, "given")  # GFLOP/s: the estimates below do not depend on this machine


def suite_of(tmp_path: Path, shapes: list[list[int]], **extra) -> object:
    cfg = tiny_suite(workloads=[{"model": "linear", "shapes": shapes}],
                     backends=["torch-eager"], **extra)
    cfg["skus"] = {"host": {"torch": {"threads": 1},
                            "measurement": {"invocations": 3, "max_invocations": 3}}}
    return load([write_suite(tmp_path / "s.yaml", cfg)])


def test_a_case_of_many_flops_is_estimated_from_them_at_the_peak(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suite = suite_of(tmp_path, [[16, 32, 32], [16384, 8192, 8192]])
    est = plan_time.estimate(suite, peak=PEAK)
    assert est["cases"] == 2 and est["basis"] == {"history": 0, "flops": 2, "steps": 0}
    big, small = est["longest"][0], est["longest"][1]
    assert big[0].endswith("linear-16384x8192x8192-f32/baseline")
    call_s = 2 * 16384 * 8192 * 8192 / (PEAK[0] * 1e9)  # 22 s a call at 100 GFLOP/s
    # Its characterization and warm-up calls, and each invocation at least one call.
    assert big[1] > 10 * call_s, est
    assert small[1] < 60, est
    line = plan_time.plan_line(est)
    assert line.startswith("plan: 2 case(s), about ") and " min one after another" in line
    assert "2 from FLOPs at this machine's peak 100 GFLOP/s (given)" in line
    assert f"longest: {big[0]} about " in line


def test_an_earlier_record_here_gives_the_case_its_own_call_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suite = suite_of(tmp_path, [[16384, 8192, 8192]])
    (case, ) = suite.cases
    without = plan_time.estimate(suite, peak=PEAK)
    record = Path(f"results/cases/{case.sku}/{case.backend}/{case.workload.id}/"
                  f"{case.recipe}.json")
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"status": "ok", "timing": {"median_ms": 2.0}}))
    est = plan_time.estimate(suite, peak=PEAK)
    assert est["basis"] == {"history": 1, "flops": 0, "steps": 0}
    assert est["seconds"] < without["seconds"] / 10
    assert "1 from earlier records here" in plan_time.plan_line(est)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("answer,started", [("y\n", True), ("n\n", False), ("\n", False)])
def test_a_long_plan_asks_in_a_terminal(answer, started):
    est = {"seconds": 7200.0, "cases": 240}
    err = _Tty()
    refusal = plan_time.confirmation(est, env={}, stdin=_Tty(answer), stderr=err)
    assert err.getvalue() == ("this plan should take about 2.0 h (240 case(s)), more than "
                              "BENCHFLOW_CONFIRM_ABOVE_S (3600 s). Start it? [y/N] ")
    assert (refusal is None) == started
    if not started:
        assert refusal.startswith("not started: this plan should take about 2.0 h")
        assert 'docs/suites.md, "A subset of a suite"' in refusal


def test_a_long_plan_without_a_terminal_needs_the_flag():
    est = {"seconds": 7200.0, "cases": 240}
    refusal = plan_time.confirmation(est, env={}, stdin=io.StringIO(), stderr=io.StringIO())
    assert "no terminal to ask; set BENCHFLOW_CONFIRMED=1 to run it" in refusal
    assert plan_time.confirmation(est, env={"BENCHFLOW_CONFIRMED": "1"},
                                  stdin=io.StringIO()) is None
    # Below the threshold, or with asking off, nothing is asked.
    assert plan_time.confirmation({**est, "seconds": 60.0}, env={}, stdin=io.StringIO()) is None
    assert plan_time.confirmation(est, env={"BENCHFLOW_CONFIRM_ABOVE_S": "0"},
                                  stdin=io.StringIO()) is None
    assert plan_time.confirmation(est, env={"BENCHFLOW_CONFIRM_ABOVE_S": "9000"},
                                  stdin=io.StringIO()) is None


CASES = [
    ("confirm-above-not-a-number", "BENCHFLOW_CONFIRM_ABOVE_S=an hour", "an hour",
     "BENCHFLOW_CONFIRM_ABOVE_S='an hour': expected a number of seconds (0: never ask)"),
    ("confirm-above-negative", "BENCHFLOW_CONFIRM_ABOVE_S=-5", "-5",
     "BENCHFLOW_CONFIRM_ABOVE_S='-5': expected a number of seconds"),
    ("confirm-above-nan", "BENCHFLOW_CONFIRM_ABOVE_S=nan", "nan",
     "BENCHFLOW_CONFIRM_ABOVE_S='nan': expected a number of seconds"),
]


@pytest.mark.parametrize("cid,desc,value,expected", CASES, ids=[c[0] for c in CASES])
def test_a_threshold_that_is_not_seconds_is_one_line(cid, desc, value, expected):
    with pytest.raises(ConfigError) as exc:
        plan_time.confirm_above_s({"BENCHFLOW_CONFIRM_ABOVE_S": value})
    (problem, ) = exc.value.problems
    assert expected in problem


@pytest.mark.tool  # snakemake's own parser probes its executor plugins (`which sacct`)
def test_the_command_line_decides_what_is_estimated(tmp_path, monkeypatch):
    """Only a run of the whole suite (no target, `all`, the report) is estimated: a
    batch's or a case's file is a subset, which neither the line nor the question is
    about."""
    monkeypatch.chdir(tmp_path)
    suite = suite_of(tmp_path, [[16384, 8192, 8192]])
    monkeypatch.setattr(plan_time, "peak_gflops", lambda root=None: PEAK)
    lines, refusal = plan_time.plan_check(suite, argv=["snakemake", "-n"], env={})
    assert refusal is None and lines[0].startswith("plan: 1 case(s), about ")
    lines, _ = plan_time.plan_check(suite, argv=["snakemake", "-n", "results/report.json"],
                                    env={})
    assert lines[0].startswith("plan: 1 case(s)")  # the report measures every case
    assert plan_time.plan_check(suite, argv=["snakemake", "-n", "results/torch/host/b0"],
                                env={}) == ([], None)
    err = io.StringIO()
    lines, refusal = plan_time.plan_check(suite, argv=["snakemake", "--cores", "2", "all"],
                                          env={"BENCHFLOW_CONFIRM_ABOVE_S": "60"},
                                          stdin=io.StringIO(), stderr=err)
    assert lines == [] and err.getvalue().startswith("plan: 1 case(s)")
    assert refusal.startswith("not started: this plan should take about ")


def test_list_of_a_suite_says_its_plan_time(tmp_path, monkeypatch, capsys):
    from workflow.cli.main import main

    monkeypatch.chdir(tmp_path)
    write_suite(tmp_path / "s.yaml", tiny_suite(workloads=[
        {"model": "linear", "shapes": [[16384, 8192, 8192]]}], backends=["torch-eager"]))
    assert main(["list", "--configfile", str(tmp_path / "s.yaml")]) == 0
    out = capsys.readouterr().out.splitlines()
    (line, ) = [x for x in out if x.startswith("plan: ")]
    assert line.startswith("plan: 2 case(s), about ") and "from FLOPs at this machine's peak" \
        in line


@pytest.mark.e2e
def test_snakemake_n_says_the_plan_time_and_a_long_run_does_not_start_unasked(tmp_path):
    suite = write_suite(tmp_path / "s.yaml", tiny_suite(workloads=[
        {"model": "linear", "shapes": [[16384, 8192, 8192]]}], backends=["torch-eager"]))
    env = {k: v for k, v in os.environ.items() if k != "BENCHFLOW_CONFIRMED"}
    dry = snakemake(tmp_path / "w", "-n", "--configfile", str(suite), env=env)
    (line, ) = [x for x in dry.stderr.splitlines() if x.startswith("plan: ")]
    assert line.startswith("plan: 2 case(s), about ")
    run = snakemake(tmp_path / "w", "--configfile", str(suite), check=False,
                    env={**env, "BENCHFLOW_CONFIRM_ABOVE_S": "1"})
    assert run.returncode == 1, run.stderr
    assert "not started: this plan should take" in run.stderr
    assert "no terminal to ask; set BENCHFLOW_CONFIRMED=1" in run.stderr
    assert not (tmp_path / "w" / "results").exists()  # no job ran
    bad = snakemake(tmp_path / "w", "-n", "--configfile", str(suite), check=False,
                    env={**env, "BENCHFLOW_CONFIRM_ABOVE_S": "an hour"})
    assert bad.returncode == 2 and "expected a number of seconds" in bad.stderr
    assert "Traceback" not in bad.stderr


@pytest.mark.tool  # snakemake.cli probes its executor plugins (`which sacct`)
def test_the_docs_subset_of_a_torchao_file_is_a_subset():
    """docs/suites.md's `--config` for a torchao file, as written, run on torchao's
    dashboard file: its 672 cases become a few, estimated in minutes, not hours."""
    import shlex

    from workflow.planning.plan import load_suite

    page = (REPO / "docs" / "suites.md").read_text()
    section = page.split("## A subset of a suite", 1)[1].split("\n## ", 1)[0]
    command = section.split("# A torchao file", 1)[1].split("\n# ", 1)[0]
    words = shlex.split(command.split("\n", 1)[1].replace("\\\n", " "))
    assert words[:2] == ["snakemake", "-n"] and "dash.yml" in words
    from snakemake.cli import parse_config

    # As snakemake reads them, then the Snakefile (planning/plan.load_suite).
    overrides = parse_config(words[words.index("--config") + 1:])
    dash = (REPO / "tests/data/upstream/torchao/published/"
            "317179ea43ff.dashboard.microbenchmark_quantization_config.yml")
    assert len(load_suite([dash], {"torchao_device": "cpu"}).cases) == 672
    subset = load_suite([dash], overrides)
    assert 0 < len(subset.cases) <= 16, len(subset.cases)
    assert plan_time.estimate(subset, peak=PEAK)["seconds"] < 3600


def test_a_user_model_of_unknown_size_is_not_estimated_at_the_largest_builtins(
        tmp_path, monkeypatch):
    """A resource request takes the largest built-in model's weights for a model it
    cannot size (under-asking kills a job); an estimate that did so called a suite of
    six tiny user models on IREE 1.6 h, and refused to start it without a terminal."""
    from tests.conftest import FAST_MEASUREMENT
    from tests.model_sources import growing_model

    monkeypatch.chdir(tmp_path)
    # A name no other test registers: a model file is imported into this process.
    (tmp_path / "unsized.py").write_text(growing_model("unsized", (4, 8)).format(width=8))
    write_suite(tmp_path / "s.yaml", {
        "skus": {"host": {"iree": {"target_cpu": "host"},
                          "measurement": dict(FAST_MEASUREMENT)}},
        "model_modules": ["unsized.py"],
        "workloads": [{"model": "unsized", "shapes": [[4, 8]]}]})
    est = plan_time.estimate(load([tmp_path / "s.yaml"]), peak=(10.0, "given"))
    assert est["cases"] == 1 and est["seconds"] < 60, est
