"""A goldens.dir that does not exist, with nothing like it beside it (`goldenz-typo`): a run
asking for the gate is refused before anything is measured (the gate job measured every
case, then failed with a traceback), `benchflow validate` warns; and the gate job's own
failure (a regression, bad input) ends in its lines, never a traceback."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import snakemake, tiny_suite, write_suite
from workflow.cli.main import main
from workflow.cli.options import EXIT_CODES
from workflow.jobs import job
from workflow.planning.plan import gate_goldens_problems, gate_in_targets, load_suite
from workflow.regression.gate import BAD_INPUT, GateFailed

TYPO = "goldenz-typo"
MISSING = f"goldens.dir: {TYPO}: no such directory"

# (id, description, expected fragment): docs/malformed-inputs.md's rows.
CASES = [
    ("gate-goldens-dir-missing-run",
     f"`snakemake results/gate.json` with `goldens: {{dir: {TYPO}}}`, no such directory and "
     "none like it (refused before any job; the gate job measured all, then a traceback)",
     f"{MISSING} (from DIR); the gate (results/gate.json) would judge 4 case(s) against it"),
    ("gate-goldens-dir-missing-validate",
     "`benchflow validate` of that suite (exit 0: a run without the gate takes it)",
     f"warning: SUITE: {MISSING}"),
    ("gate-job-fails-without-traceback",
     "the gate job's failure (bad input, a regression) as the job's uncaught GateFailed",
     "benchflow: the gate failed: bad input:"),
]
EXPECTED = {row[0]: row[-1] for row in CASES}


def typo_suite(tmp_path):
    return write_suite(tmp_path / "suite.yaml", tiny_suite(goldens={"dir": TYPO}))


@pytest.mark.e2e
def test_a_run_asking_for_the_gate_is_refused_before_any_job(tmp_path):
    suite = typo_suite(tmp_path)
    for target in ("results/gate.json", "gate", str(tmp_path / "results/gate.json")):
        proc = snakemake(tmp_path, target, "--configfile", str(suite), check=False)
        assert proc.returncode == EXIT_CODES[BAD_INPUT], proc.stderr
        assert "Traceback" not in proc.stderr and "no job was run" in proc.stderr
        expected = EXPECTED["gate-goldens-dir-missing-run"].replace("DIR", str(tmp_path))
        assert expected in proc.stderr, proc.stderr
        assert not (tmp_path / "results").exists()  # nothing measured
    # Without the gate the suite runs (planned here: its cases are reported no-golden).
    dry = snakemake(tmp_path, "-n", "results/report.json", "--configfile", str(suite))
    assert MISSING not in dry.stderr


@pytest.mark.e2e  # Snakemake's parser: its SLURM plugin looks for sacct and squeue
def test_the_gate_is_told_among_the_targets_by_snakemakes_parser():
    argv = ["snakemake"]
    assert gate_in_targets([*argv, "results/gate.json", "--cores", "1"])
    assert gate_in_targets([*argv, "--cores", "1", "./results/gate.json"])
    assert gate_in_targets([*argv, "-n", "gate"])
    assert not gate_in_targets([*argv, "results/report.json", "--config", "gate=1"])
    assert not gate_in_targets([*argv, "--configfile", "s.yaml"])
    assert not gate_in_targets(argv)


def test_only_a_missing_dir_that_cases_need_is_a_problem(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suite = load_suite([str(typo_suite(tmp_path))], {})
    problems = gate_goldens_problems(suite, None)
    assert len(problems) == 1 and MISSING in problems[0]
    assert "host/iree/" in problems[0] and "4 case(s)" in problems[0]
    (tmp_path / TYPO).mkdir()  # made, as before a first `benchflow bless`
    assert gate_goldens_problems(suite, None) == []


def test_validate_warns_and_passes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    suite = typo_suite(tmp_path)
    assert main(["validate", str(suite)]) == 0
    err = capsys.readouterr().err
    assert EXPECTED["gate-goldens-dir-missing-validate"].replace("SUITE", str(suite)) in err


def test_the_gate_jobs_failure_is_its_lines_without_a_traceback(monkeypatch, capsys):
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(job.signal, "signal", lambda *a: None)
    job.end_quietly_on_ctrl_c()
    try:
        raise GateFailed(f"bad input:\n  {TYPO}: no such directory")
    except GateFailed as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    err = capsys.readouterr().err
    assert err.startswith(EXPECTED["gate-job-fails-without-traceback"]), err
    assert "Traceback" not in err and f"{TYPO}: no such directory" in err
    try:
        raise KeyError("own bug")  # benchflow's own bug keeps its traceback
    except KeyError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    assert "Traceback" in capsys.readouterr().err
