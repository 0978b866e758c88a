"""The gates never exit 0 without having judged (issue 20): `benchflow check`,
`benchflow ab`, the gate rule and the ab rule; the re-measure of inconclusive cases; the
README's table of exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO, snakemake, tiny_suite, write_suite
from tests.test_goldens import BASE, PASSED, REGRESSED, make_case, make_report
from workflow.cli.main import main
from workflow.cli.options import EXIT_CODES
from workflow.comparisons.ab import aggregate
from workflow.errors import ConfigError
from workflow.gating import gates, remeasure
from workflow.measure.protocol import Observation
from workflow.records.storage import write_json
from workflow.regression import gate

INCONCLUSIVE = {"verdict": "inconclusive", "ratio": 1.2, "p_value": 0.2, "tolerance": 1.1,
                "dispatch_verdict": "pass", "size_verdict": "pass", "source": "g/host.json",
                "reason": "would be regression but not significant (p >= 0.05)"}
NO_GOLDEN = {"verdict": "no-golden", "dispatch_verdict": "no-golden",
             "size_verdict": "no-golden", "reason": "no golden for this case"}


def check(tmp_path, *cases, args=()) -> int:
    path = tmp_path / "r.json"
    write_json(path, make_report(*cases))
    return main(["check", "--report", str(path), "--remeasure-budget", "0", *args])


def test_every_outcome_of_the_gate_has_an_exit_code():
    """(The tables in docs/goldens.md and the README: tests/test_docs_tables.py.)"""
    assert set(EXIT_CODES) == set(gate.OUTCOMES)


def test_an_inconclusive_case_exits_3_and_0_when_allowed(tmp_path, capsys):
    cases = (make_case("host/iree/a/baseline", BASE, golden=PASSED),
             make_case("host/iree/b/baseline", BASE, golden=INCONCLUSIVE))
    assert check(tmp_path, *cases) == 3
    out = capsys.readouterr().out
    assert "COULD NOT JUDGE host/iree/b/baseline: inconclusive: would be regression" in out
    assert "COULD NOT JUDGE: 0 of 2 case(s) regressed, 1 could not be judged, 1 judged" in out
    assert check(tmp_path, *cases, args=["--allow-inconclusive"]) == 0
    out = capsys.readouterr().out
    assert ("NOT JUDGED host/iree/b/baseline: inconclusive: would be regression but not "
            "significant (p >= 0.05) (counted as ok: --allow-inconclusive)") in out
    assert out.splitlines()[-1].startswith("ok: 0 of 2 case(s) regressed, 1 judged")
    # Verdicts in words, as the report names them (not a Python enum's repr).
    assert re.search(r"time verdicts: 1 pass, 1 inconclusive$", out.splitlines()[-1]), out


def test_a_regression_outranks_a_case_that_could_not_be_judged(tmp_path, capsys):
    assert check(tmp_path, make_case("host/iree/a/baseline", BASE, golden=REGRESSED),
                 make_case("host/iree/b/baseline", BASE, golden=INCONCLUSIVE)) == 1
    out = capsys.readouterr().out
    assert "REGRESSED host/iree/a/baseline" in out and "COULD NOT JUDGE host/iree/b" in out


def test_no_golden_is_ok_unless_required_and_nothing_judged_is_not(tmp_path, capsys):
    judged = make_case("host/iree/a/baseline", BASE, golden=PASSED)
    bare = make_case("host/iree/new/baseline", BASE, golden=NO_GOLDEN)
    assert check(tmp_path, judged, bare) == 0
    assert ("NOT JUDGED host/iree/new/baseline: no golden (no golden for this case) (counted "
            "as ok: --require-goldens fails it)") in capsys.readouterr().out
    assert check(tmp_path, judged, bare, args=["--require-goldens"]) == 3
    assert check(tmp_path, judged, bare, args=["--require-goldens",
                                               "--allow-inconclusive"]) == 3
    capsys.readouterr()
    assert check(tmp_path, bare) == 3  # the gate judged nothing at all
    assert "no case of the report was judged" in capsys.readouterr().out
    assert check(tmp_path, bare, args=["--allow-inconclusive"]) == 0


def test_a_failed_case_with_nothing_judged_is_never_ok(tmp_path, capsys):
    failed = make_case("host/iree/a/baseline", BASE, status="failed", golden={
        **NO_GOLDEN, "source": "bench/a.json", "reason": "case failed at compile: no golden "
                                                        "time"})
    ok = make_case("host/iree/b/baseline", BASE, golden=PASSED)
    for args in ([], ["--allow-inconclusive"]):
        assert check(tmp_path, failed, ok, args=args) == 3
        assert ("COULD NOT JUDGE host/iree/a/baseline: failed at compile, nothing to judge "
                "against its golden bench/a.json") in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["--goldens", "/no/such/dir"], "/no/such/dir: no such directory: --goldens takes"),
    (["--goldens", "{report}"], ": not a directory: --goldens takes"),
])
def test_bad_goldens_exit_2(tmp_path, capsys, argv, message):
    path = tmp_path / "r.json"
    write_json(path, make_report(make_case("host/iree/a/baseline", BASE, golden=PASSED)))
    argv = [a.format(report=path) for a in argv]
    assert main(["check", "--report", str(path), *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


@pytest.mark.tool
def test_the_console_script_exits_2_for_a_missing_goldens_dir(tmp_path):
    path = tmp_path / "r.json"
    write_json(path, make_report(make_case("host/iree/a/baseline", BASE, golden=PASSED)))
    proc = subprocess.run([str(REPO / ".venv/bin/benchflow"), "check", "--report", str(path),
                           "--goldens", "/no/such/dir"], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr


# --- the gate rule ----------------------------------------------------------------------

def gate_files(tmp_path, *cases):
    report = tmp_path / "r.json"
    write_json(report, make_report(*cases))
    return str(report), str(tmp_path / "gate.json"), str(tmp_path / "gate.log")


def test_the_gate_rule_fails_on_could_not_judge_unless_the_suite_allows_it(tmp_path):
    report, out, log = gate_files(tmp_path, make_case("host/iree/a/baseline", BASE,
                                                      golden=PASSED),
                                  make_case("host/iree/b/baseline", BASE, golden=INCONCLUSIVE))
    settings = {"dir": str(tmp_path), "allow_inconclusive": False, "require_goldens": False}
    with pytest.raises(gate.GateFailed, match="could not judge:\n  host/iree/b/baseline: "
                                              "inconclusive"):
        gate.run_gate(report, out, log, settings)
    record = json.loads(open(log).read())
    assert record["outcome"] == "could-not-judge" and not record["passed"]
    assert record["could_not_judge"][0]["case_id"] == "host/iree/b/baseline"
    result = gate.run_gate(report, out, log, {**settings, "allow_inconclusive": True})
    written = json.loads(open(out).read())
    assert result["passed"] and written["outcome"] == "passed" and written["judged"] == 1
    assert written["not_judged"][0]["kind"] == "inconclusive"


def test_the_gate_rule_refuses_a_goldens_dir_that_does_not_exist(tmp_path):
    bare = make_case("host/iree/a/baseline", BASE, golden=NO_GOLDEN)
    report, out, log = gate_files(tmp_path, bare)
    with pytest.raises(gate.GateFailed, match="bad input:\n  goldns: no such directory .*1 "
                                              "case\\(s\\) have no golden"):
        gate.run_gate(report, out, log, {"dir": "goldns"})
    # A suite whose cases all have goldens of their own (benchmark files) needs none.
    report, out, log = gate_files(tmp_path, make_case(
        "host/iree/m.x_cpu/baseline", BASE, golden={**PASSED, "source": "bench/m/x.json"}))
    assert gate.run_gate(report, out, log, {"dir": "goldns"})["passed"]


def test_the_gate_rule_fails_when_the_report_cannot_be_read(tmp_path):
    (tmp_path / "r.json").write_text("{")
    with pytest.raises(gate.GateFailed, match="bad input:\n  .*r.json: not valid JSON"):
        gate.run_gate(str(tmp_path / "r.json"), str(tmp_path / "g.json"),
                      str(tmp_path / "g.log"))


# --- re-measuring inconclusive cases ----------------------------------------------------

CID = "host/iree/w-f32/baseline"


@pytest.fixture
def on_disk(tmp_path, monkeypatch):
    """A working directory holding what the run stage of CID left (its recorded command,
    the export's inputs, the module) and goldens of 5 invocations near 1 ms."""
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "results/run/host/iree/w-f32/baseline/timing.json"
    run.parent.mkdir(parents=True)
    write_json(run, {"stage": "run", "status": "ok", "command": [
        "iree-benchmark-module", "--module=results/compile/host/w-f32/module.vmfb",
        "--function=main", "--device=local-task", "--input=4xf32=@/gone/arg0.bin",
        "--benchmark_repetitions=3", "--benchmark_format=json"]})
    export = tmp_path / "results/export/w-f32"
    export.mkdir(parents=True)
    np.savez(export / "inputs.npz", arg0=np.ones(4, dtype=np.float32))
    write_json(export / "export.json", {"inputs": [{"dtype": "float32"}]})
    vmfb = tmp_path / "results/compile/host/w-f32/module.vmfb"
    vmfb.parent.mkdir(parents=True)
    vmfb.write_bytes(b"module")
    report = tmp_path / "r.json"
    write_json(report, make_report(make_case(CID, BASE)))
    assert main(["bless", "--report", str(report), "--goldens", "goldens", "--yes"]) == 0
    return tmp_path


def fake_benchmark(monkeypatch, medians, delay_s=0.0):
    """iree-benchmark-module replaced: each call returns the next median; the argv of
    each call is kept, with whether its input files existed then."""
    calls = []
    values = iter(medians)

    class Run:
        def __init__(self, argv):
            inputs = [a.rpartition("=@")[2] for a in argv if a.startswith("--input=")]
            calls.append((argv, all(map(lambda p: open(p, "rb").read(), inputs))))
            time.sleep(delay_s)
            self.median_ms = next(values)

    monkeypatch.setattr(remeasure, "iree_invocation",
                        lambda argv, timeout, log, m, layout=None: Observation(Run(argv).median_ms))
    return calls


def inconclusive_report(tmp_path, **fields) -> str:
    # Median 1.2x the golden's, overlapping it: not significant, so inconclusive.
    path = tmp_path / "r.json"
    write_json(path, make_report(make_case(CID, [1.20, 0.98, 1.25, 1.00, 1.22], **fields)))
    return str(path)


def test_check_measures_an_inconclusive_case_again_and_judges_the_new_invocations(
        on_disk, monkeypatch, capsys):
    report = inconclusive_report(on_disk)
    assert main(["check", "--report", report, "--goldens", "goldens",
                 "--remeasure-budget", "0"]) == 3
    capsys.readouterr()
    calls = fake_benchmark(monkeypatch, [9.0] + [1.5, 1.52, 1.49, 1.51, 1.5])
    assert main(["check", "--report", report, "--goldens", "goldens"]) == 1
    out = capsys.readouterr().out
    assert (f"REMEASURED {CID}: inconclusive -> regression: 5 new invocations in ") in out
    assert "judged alone (not pooled with the report's 5)" in out
    assert f"REGRESSED {CID}: time regressed (time x1.500" in out
    # One untimed call, then as many as the report had; the recorded command with its
    # inputs written again (they existed while it ran).
    assert len(calls) == 6 and all(existed for _, existed in calls)
    argv = calls[0][0]
    assert argv[:4] == ["iree-benchmark-module",
                        "--module=results/compile/host/w-f32/module.vmfb", "--function=main",
                        "--device=local-task"]
    assert argv[4].startswith("--input=4xf32=@") and "/gone/" not in argv[4]


def test_check_from_another_directory_measures_with_the_runs_own_files(
        on_disk, monkeypatch, capsys):
    """`check --report n3/results/report.json` typed outside n3: the run stage, the
    export and the module are read under n3, as the run wrote them, not under the
    working directory (a raw `[Errno 2] ... 'results/run/...'` before)."""
    report = on_disk / "results" / "report.json"
    report.write_text(Path(inconclusive_report(on_disk)).read_text())
    elsewhere = on_disk / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    calls = fake_benchmark(monkeypatch, [9.0] + [1.5, 1.52, 1.49, 1.51, 1.5])
    assert main(["check", "--report", "../results/report.json", "--goldens",
                 str(on_disk / "goldens")]) == 1
    out = capsys.readouterr().out
    assert f"REMEASURED {CID}: inconclusive -> regression: 5 new invocations" in out, out
    argv = calls[0][0]
    assert Path(argv[1].removeprefix("--module=")).resolve() == \
        on_disk / "results/compile/host/w-f32/module.vmfb"
    # A file the run lost is named where it was looked for.
    (on_disk / "results/compile/host/w-f32/module.vmfb").unlink()
    assert main(["check", "--report", "../results/report.json", "--goldens",
                 str(on_disk / "goldens")]) == 3
    out = capsys.readouterr().out
    assert f"NOT REMEASURED {CID}: {on_disk}/results/compile/host/w-f32/module.vmfb is " \
           f"absent (the run's directory {on_disk} holds results/ without it)" in out, out


def test_a_re_measurement_that_is_still_inconclusive_exits_3(on_disk, monkeypatch, capsys):
    fake_benchmark(monkeypatch, [1.0] + [1.20, 0.98, 1.25, 1.00, 1.22])
    assert main(["check", "--report", inconclusive_report(on_disk), "--goldens",
                 "goldens"]) == 3
    out = capsys.readouterr().out
    assert f"REMEASURED {CID}: inconclusive -> inconclusive" in out
    assert f"COULD NOT JUDGE {CID}: inconclusive" in out


@pytest.mark.parametrize(("fields", "why"), [
    ({"backend": "torch-eager"}, "torch case (torch-eager): its invocations are worker "
                                 "processes"),
    ({"provenance": {"host": "elsewhere"}}, "measured on elsewhere, this is "),
])
def test_what_cannot_be_measured_again_says_why(on_disk, monkeypatch, capsys, fields, why):
    calls = fake_benchmark(monkeypatch, [])
    assert main(["check", "--report", inconclusive_report(on_disk, **fields), "--goldens",
                 "goldens"]) == 3
    assert f"NOT REMEASURED {CID}: {why}" in capsys.readouterr().out
    assert calls == []


def test_a_budget_too_short_for_the_test_measures_nothing_more(on_disk, monkeypatch, capsys):
    calls = fake_benchmark(monkeypatch, [1.0] * 10, delay_s=0.05)
    assert main(["check", "--report", inconclusive_report(on_disk), "--goldens", "goldens",
                 "--remeasure-budget", "0.1"]) == 3
    assert re.search(r"NOT REMEASURED .*: its share of the budget, 0\.1 s, fits [01] "
                     r"invocations of 0\.\d\d s; p < 0\.05 against 5 needs at least 2",
                     capsys.readouterr().out)
    assert len(calls) == 1  # the untimed one that said how long an invocation takes


def test_missing_files_say_which(on_disk, monkeypatch, capsys):
    (on_disk / "results/compile/host/w-f32/module.vmfb").unlink()
    fake_benchmark(monkeypatch, [])
    assert main(["check", "--report", inconclusive_report(on_disk), "--goldens",
                 "goldens"]) == 3
    assert (f"NOT REMEASURED {CID}: results/compile/host/w-f32/module.vmfb is absent "
            "(the working directory holds results/ without it)" in capsys.readouterr().out)


# --- benchflow ab and the ab rule --------------------------------------------------------

def test_ab_on_a_suite_without_pairs_exits_2_before_any_job(tmp_path, capsys):
    suite = write_suite(tmp_path / "suite.yaml", tiny_suite())
    assert main(["ab", "--configfile", str(suite), "--directory", str(tmp_path)]) == 2
    assert f"{suite}: ab_pairs: none declared" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()
    assert main(["ab", "--configfile", str(tmp_path / "none.yaml")]) == 2


@pytest.mark.e2e
def test_the_ab_rule_refuses_to_write_an_empty_comparison(tmp_path):
    with pytest.raises(ConfigError, match="tiny: ab_pairs: none declared"):
        aggregate([], str(tmp_path / "ab.json"), suite_name="tiny", config_hash="c")
    suite = write_suite(tmp_path / "suite.yaml", tiny_suite())
    proc = snakemake(tmp_path, "results/ab.json", "--configfile", str(suite), check=False)
    assert proc.returncode != 0 and "ab_pairs: none declared" in proc.stdout + proc.stderr
    assert not (tmp_path / "results/ab.json").exists()


def row(verdict: str, **fields) -> dict:
    base = {"base": "host", "new": "generic", "workload": "linear-16x32x32-f32",
            "verdict": verdict}
    if verdict == "failed":
        return {**base, "failed_stage": "run", "error": "no cuda device here", **fields}
    return {**base, "ratio": 1.01, "ci95": [0.97, 1.05], "p_value": 0.5, "rounds": 48,
            "seconds": 30.0, "stop_reason": "max-rounds", "mde": 1.06, **fields}


@pytest.mark.parametrize(("verdicts", "args", "code", "line"), [
    (["no-difference", "failed"], [], 3, "COULD NOT JUDGE host -> generic linear-16x32x32-f32:"
                                         " failed at run, no rounds measured: no cuda device"),
    (["failed"], ["--allow-inconclusive"], 3, "COULD NOT JUDGE host -> generic"),
    (["inconclusive"], [], 3, "COULD NOT JUDGE host -> generic linear-16x32x32-f32: "
                              "inconclusive, its interval spans the margin after 48 rounds"),
    (["inconclusive"], ["--allow-inconclusive"], 0, "(counted as ok: --allow-inconclusive)"),
    (["regression", "failed"], [], 1, "FAIL: 1 of 2 A/B row(s) regressed, 1 could not be"),
    (["no-difference", "improvement"], [], 0, "ok: 0 of 2 A/B row(s) regressed"),
])
def test_ab_exit_codes_per_row_verdict(tmp_path, monkeypatch, capsys, verdicts, args, code,
                                       line):
    from tests.test_ab import ab_suite

    suite = write_suite(tmp_path / "suite.yaml", ab_suite())
    write_json(tmp_path / "results/ab.json", {"pairs": [row(v) for v in verdicts]})
    monkeypatch.setattr(gates, "run_attached", lambda cmd: 0)
    assert main(["ab", "--configfile", str(suite), "--directory", str(tmp_path), *args]) == code
    assert line in capsys.readouterr().out


def test_ab_could_not_judge_when_snakemake_fails(tmp_path, monkeypatch, capsys):
    from tests.test_ab import ab_suite

    suite = write_suite(tmp_path / "suite.yaml", ab_suite())
    monkeypatch.setattr(gates, "run_attached", lambda cmd: 1)
    assert main(["ab", "--configfile", str(suite), "--directory", str(tmp_path)]) == 3
    assert "COULD NOT JUDGE: snakemake exited 1" in capsys.readouterr().out


def test_a_gates_refusal_shows_the_control_characters_it_quotes(tmp_path, capsys):
    """A gate's bad input (exit 2) quotes the user's path as every command does: its
    escape sequences shown, not obeyed (cli/options.print_problems)."""
    report = tmp_path / "r\x1b[2J.json"
    assert main(["check", "--report", str(report)]) == 2
    err = capsys.readouterr().err
    assert "r\\x1b[2J.json" in err and "\x1b" not in err
