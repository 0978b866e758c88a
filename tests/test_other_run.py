"""A second snakemake started in a directory where a first is still running: one line naming
the first (its PID, since when, its command), never Snakemake's LockException nor its
IncompleteFilesException advising --rerun-incomplete (which, taken, would delete what
the first run is making) (workflow/planning/other_run.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, snakemake, tiny_suite, write_suite
from workflow.commands import single_run
from workflow.planning.other_run import (
    OTHER_RUN,
    OtherRun,
    is_snakemake,
    other_runs,
    refusal_line,
)

# (id, description, expected fragment): docs/malformed-inputs.md's rows.
CASES = [
    ("second-run-during-first-job",
     "a second `snakemake` in the directory while the first runs a job (it said "
     "IncompleteFilesException ... --rerun-incomplete; that advice then LockException)",
     f"benchflow: {OTHER_RUN} DIR: PID N, since"),
    ("second-run-while-first-plans",
     "a second `snakemake` started while the first builds its DAG (it said LockException: "
     "Directory cannot be locked ... --unlock)",
     "this run started nothing there: run it again once PID N has ended"),
]
FAKE = "import time; time.sleep(120)\n"
# A model whose build waits until the file H_OTHER_RUN_RELEASE names exists.
WAITING_MODEL = '''import os
import time

from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model


@benchmark_model(default_shape=(2, 8), shape_doc="[rows, 8]")
def h_other_run_waiting(config, dtype, layers, shape):
    import torch

    while not os.path.exists(os.environ["H_OTHER_RUN_RELEASE"]):
        time.sleep(0.1)
    return finish(torch.nn.Linear(8, 8), (torch.randn(*shape, generator=seeded()),), dtype)
'''


def fake_snakemake(tmp_path: Path, cwd: Path, *args: str) -> subprocess.Popen:
    """A process whose command line is a snakemake's (`python DIR/snakemake ARGS`),
    working in `cwd`, that sleeps: another run as the process table shows it."""
    script = tmp_path / "bin" / "snakemake"
    script.parent.mkdir(exist_ok=True)
    script.write_text(FAKE)
    proc = subprocess.Popen([sys.executable, str(script), *args], cwd=cwd)
    time.sleep(0.05)  # started strictly before what the test starts next
    return proc


def test_what_counts_as_a_snakemake_run():
    assert is_snakemake(["/venv/bin/python", "-m", "snakemake", "results/report.json"])
    assert is_snakemake(["/usr/bin/python3", "/venv/bin/snakemake", "--cores", "2"])
    assert is_snakemake(["snakemake", "results/gate.json"])
    assert is_snakemake(["/venv/bin/python", "/venv/lib/snakemake/__main__.py", "-s", "S"])
    # Nothing held: a dry run, --unlock, a job process Snakemake starts for its own run.
    for quiet in ("-n", "-np", "-pn", "--dry-run", "--unlock", "--target-jobs"):
        assert not is_snakemake(["snakemake", quiet, "results/report.json"])
    assert is_snakemake(["snakemake", "-p", "-j4", "results/report.json"])
    assert not is_snakemake(["/venv/bin/python", "x/.snakemake/scripts/tmp.iree_batch.py"])
    assert not is_snakemake(["/venv/bin/benchflow", "run", "-m", "linear"])
    assert not is_snakemake([])


def test_the_line_names_the_other_run_and_gives_no_snakemake_advice():
    line = refusal_line("/w", OtherRun(4242, 1_000_000.0, ["snakemake", "results/x.json"]),
                        now=1_000_006.4)
    assert line.startswith(f"benchflow: {OTHER_RUN} /w: PID 4242, since 1970-01-1")
    assert "(6 s ago): snakemake results/x.json;" in line and "\n" not in line
    assert "--rerun-incomplete" not in line and "--unlock" not in line
    assert "run it again once PID 4242 has ended" in line


@pytest.mark.e2e  # starts processes standing for other runs
def test_only_an_earlier_run_in_this_directory_counts(tmp_path):
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    procs = [fake_snakemake(tmp_path, elsewhere, "results/report.json"),
             fake_snakemake(tmp_path, here, "-n", "results/report.json"),
             fake_snakemake(tmp_path, here, "results/report.json"),
             fake_snakemake(tmp_path, here, "results/gate.json")]
    try:
        first, later = procs[2], procs[3]
        # Seen from the later run: the first only (not the dry run, not another directory).
        runs = other_runs(here, me=later.pid)
        assert [r.pid for r in runs] == [first.pid], runs
        assert runs[0].command[-1] == "results/report.json"
        # Seen from the first: none started before it, so of two together one goes on.
        assert other_runs(here, me=first.pid) == []
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.mark.e2e
def test_a_snakemake_beside_a_running_one_is_refused_in_one_line(tmp_path):
    suite = write_suite(tmp_path / "suite.yaml", tiny_suite())
    other = fake_snakemake(tmp_path, tmp_path, "results/report.json")
    try:
        proc = snakemake(tmp_path, "results/report.json", "--configfile", str(suite),
                         check=False)
    finally:
        other.kill()
        other.wait()
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if OTHER_RUN in ln]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"benchflow: {OTHER_RUN} {tmp_path}: PID {other.pid}, since ")
    # A run that holds no lock yet (planning), as the first one here.
    assert CASES[1][-1].replace("PID N", f"PID {other.pid}") in lines[0]
    assert "Traceback" not in proc.stderr and "--rerun-incomplete" not in proc.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.e2e
def test_a_second_real_run_names_the_first_during_its_job(tmp_path):
    """The issue's case: a first snakemake in its job (its batch's outputs marked
    incomplete), a second started then, and again with the advice Snakemake gave."""
    # The first run's one model waits in its export until the test releases it, so that
    # the first is still in its job when the others start, whatever the machine's load,
    # and costs no CPU meanwhile (a tiny suite's exports come from the session's cache:
    # it would finish in seconds, before the second was told).
    release = tmp_path / "release"
    (tmp_path / "waiting.py").write_text(WAITING_MODEL)
    suite = write_suite(tmp_path / "suite.yaml", tiny_suite(
        skus={"host": tiny_suite()["skus"]["host"]}, model_modules=["waiting.py"],
        workloads=[{"model": "h_other_run_waiting", "shapes": [[2, 8]]}]))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
           str(tmp_path), "--cores", "2", "results/report.json", "--configfile", str(suite)]
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, "H_OTHER_RUN_RELEASE": str(release)})
    try:
        incomplete = tmp_path / ".snakemake" / "incomplete"
        deadline = time.monotonic() + 300
        while not (incomplete.is_dir() and any(incomplete.iterdir())):
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        # A dry run plans beside it, as Snakemake lets it.
        dry = subprocess.run([*cmd, "-n"], capture_output=True, text=True, timeout=300)
        assert dry.returncode == 0 and OTHER_RUN not in dry.stderr, dry.stderr
        for extra in ([], ["--rerun-incomplete"]):
            second = subprocess.run([*cmd, *extra], capture_output=True, text=True,
                                    timeout=300)
            assert first.poll() is None, "the first run ended before the second was told"
            expected = CASES[0][-1].replace("DIR", str(tmp_path)).replace(
                "PID N", f"PID {first.pid}")
            assert second.returncode == 1 and expected in second.stderr, second.stderr
            assert CASES[1][-1].replace("PID N", f"PID {first.pid}") in second.stderr
            for said in ("IncompleteFilesException", "--rerun-incomplete", "LockException",
                         "Traceback"):
                assert said not in second.stderr, second.stderr
    finally:
        release.touch()
        first.terminate()
        first.wait(timeout=120)


@pytest.mark.e2e
def test_benchflow_run_waits_on_the_line_as_on_snakemakes_lock(tmp_path):
    """`benchflow run` retries a snakemake refused for another run in its directory."""
    argv = [sys.executable, "-c", f"import sys; print({OTHER_RUN!r}); sys.exit(1)",
            "--directory", str(tmp_path)]
    started = time.monotonic()
    assert single_run.run_snakemake(argv, tmp_path / "log", False, wait_s=0.5) == 1
    assert time.monotonic() - started >= 0.5  # it waited, trying again
    assert "still locked by another snakemake" in (tmp_path / "log").read_text()
