"""Ctrl-C in the long commands (`benchflow ab` in both modes, `bisect`, `history
ingest`): one line saying what became of the work, no traceback, exit 130 (128 +
SIGINT, as a shell reports it), and nothing left that refuses the rerun.

Each command runs as a user starts it, in a process group of its own, and gets the
terminal's Ctrl-C: SIGINT to the whole group (the tools benchflow started in it too), at
a moment the test waits for (the command is measuring, or writing the store)."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FAST_MEASUREMENT, REPO, write_suite
from tests.test_bisect import CASE, build_repo

# The command as the console script runs it, with Python's own Ctrl-C handler: a test
# runner's worker may have been started with SIGINT ignored, which its children inherit.
MAIN = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from workflow.cli.main import main; sys.exit(main(sys.argv[1:]))")


def interrupted(argv: list[str], ready, tmp_path: Path, *, after_s: float = 0.0,
                wait_s: float = 600.0, alone: bool = False,
                sig: int = signal.SIGINT) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `benchflow argv` given Ctrl-C once ready(stdout,
    stderr) holds (and `after_s` more seconds have passed); the test fails when the
    command ends first. `alone`: SIGINT to the benchflow process only (`kill -INT`, as
    some CI runners cancel a job), not to its group; `sig`: another signal (SIGTERM, a
    CI job cancelled)."""
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out, "w") as o, open(err, "w") as e:
        proc = subprocess.Popen([sys.executable, "-c", MAIN, *map(str, argv)], stdout=o,
                                stderr=e, cwd=REPO, start_new_session=True)
    try:
        deadline = time.monotonic() + wait_s
        while not ready(out.read_text(errors="replace"), err.read_text(errors="replace")):
            assert proc.poll() is None, (f"ended before it was interrupted: {proc.returncode}"
                                         f"\n{out.read_text()}\n{err.read_text()}")
            assert time.monotonic() < deadline, "never got to the point to interrupt"
            time.sleep(0.1)
        time.sleep(after_s)
        assert proc.poll() is None, "ended before it was interrupted"
        (os.kill if alone else os.killpg)(proc.pid, sig)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return code, out.read_text(errors="replace"), err.read_text(errors="replace")


def assert_one_line(code: int, err: str, start: str, sig: int = signal.SIGINT) -> None:
    assert "Traceback" not in err, err
    assert code == 128 + sig, (code, err)  # 130 for SIGINT
    # The command's own line (snakemake's summary, above it in `ab`, may say so too).
    lines = [line for line in err.splitlines() if line.startswith("interrupted: benchflow")]
    assert len(lines) == 1 and lines[0].startswith(f"interrupted: {start}"), err
    assert err.rstrip().endswith(lines[0]), "the line is the last word"


def reports(tmp_path: Path, n: int) -> list[Path]:
    """n reports of distinct runs (commit and times their own), from a real one."""
    base = json.loads((REPO / "tests/data/report_iree.json").read_text())
    paths = []
    for i in range(n):
        report = copy.deepcopy(base)
        report["provenance"]["git_sha"] = f"{i:040x}"
        for case in report["cases"]:
            case["provenance"]["started_at"] = f"2026-10-{1 + i // 1440:02d}T" \
                                               f"{i // 60 % 24:02d}:{i % 60:02d}:00+00:00"
        paths.append(tmp_path / "reports" / f"r{i:03d}.json")
        paths[-1].parent.mkdir(exist_ok=True)
        paths[-1].write_text(json.dumps(report))
    return paths


@pytest.fixture(scope="module")
def report_files(tmp_path_factory) -> list[Path]:
    """The 400 reports the ingest tests read (made once: ~2 s of JSON; each test only
    reads them, into a store of its own)."""
    return reports(tmp_path_factory.mktemp("ingest"), 400)


@pytest.mark.tool
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_in_history_ingest_keeps_the_store_usable(tmp_path, sig, report_files):
    """SIGTERM (a CI job cancelled) as Ctrl-C, exit 143: it ended benchflow without a
    word, its work in whatever state the signal found it."""
    files, store = report_files, tmp_path / "store"
    # Once the store exists every file has been read: it is being written.
    code, _, err = interrupted(["history", "ingest", *files, "--store", store],
                               lambda out, err: store.exists(), tmp_path, after_s=0.3,
                               sig=sig)
    assert_one_line(code, err, "benchflow history ingest; rerun it to add the rest", sig)
    again = subprocess.run([sys.executable, "-m", "workflow.cli.main", "history", "ingest",
                            *map(str, files), "--store", str(store)], capture_output=True,
                           text=True, cwd=REPO, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "33600 row(s)" in again.stdout or "already in the history" in again.stdout


# A pair that measures until it is interrupted: a change of 0.4 % (one column more) to be
# resolved within 0.1 %, in up to 10 minutes.
SLIGHT = {"width": 257}
LONG_AB = {"margin": 0.001, "max_rounds": 10000, "budget_s": 600}


@pytest.mark.e2e
def test_ctrl_c_in_bisect_keeps_the_builds(tmp_path):
    # Three commits, the change in the last: a revision between the ends (which inherits
    # the good end's key without a process of its own), and the ends' two builds; a
    # fourth commit after the change cost one more keying process (torch, an export)
    # and was never measured: the ends are measured first, and interrupted there.
    shas = build_repo(tmp_path / "repo", {3: SLIGHT}, n=3, ab=LONG_AB)
    cache = tmp_path / "cache"
    code, out, err = interrupted(
        ["bisect", CASE, "--good", shas[0], "--bad", shas[-1], "--configfile",
         tmp_path / "repo" / "suite.yaml", "--cache", cache],
        lambda out, err: "measuring " in out, tmp_path, after_s=1.0)
    assert_one_line(code, err, f"benchflow bisect; rerun to finish: the revisions' trees "
                               f"and builds made so far are kept in {cache.resolve()}")
    assert list((cache / "builds").iterdir()), "the builds are kept"


@pytest.mark.e2e
def test_ctrl_c_in_ab_of_two_revisions(tmp_path):
    shas = build_repo(tmp_path / "repo", {2: SLIGHT}, n=2, ab=LONG_AB)
    cache, output = tmp_path / "cache", tmp_path / "ab.json"
    code, _, err = interrupted(
        ["ab", "--base", shas[0], "--new", shas[1], "--configfile",
         tmp_path / "repo" / "suite.yaml", "--cache", cache, "--output", output],
        lambda out, err: "measuring " in err, tmp_path, after_s=1.0)
    assert_one_line(code, err, "benchflow ab --base --new; rerun to finish: the revisions' "
                               f"trees and builds made so far are kept in {cache.resolve()}")
    assert not output.exists(), "no comparison of half the cases"


@pytest.mark.e2e
@pytest.mark.parametrize("alone", [False, True], ids=["terminal", "kill-int-benchflow"])
def test_ctrl_c_in_ab_leaves_no_lock_and_no_job_running(tmp_path, alone):
    suite = {"suite_name": "ab",
             "skus": {name: {"iree": {"target_cpu": "host", "device": "local-sync"},
                             "measurement": {**FAST_MEASUREMENT, "min_time_s": 0.02}}
                      for name in ("a", "b")},
             "workloads": [{"model": "linear", "shapes": [[64, 128, 128]]}],
             "ab_pairs": [{"base": "a", "new": "b"}],
             "ab": LONG_AB}
    path = write_suite(tmp_path / "suite.yaml", suite)
    work = tmp_path / "work"
    work.mkdir()
    locks = work / ".snakemake" / "locks"
    try:
        # Snakemake holds the directory while its A/B job measures.
        code, _, err = interrupted(["ab", "--configfile", path, "--cores", "1",
                                    "--directory", work],
                                   lambda out, err: "rule ab" in out + err, tmp_path,
                                   after_s=3.0, alone=alone)
        assert_one_line(code, err, "benchflow ab; rerun to finish: the A/B rows that were "
                                   "finished are kept")
        # Snakemake was let stop on its own: it unlocked the directory, so the rerun is
        # not refused ("Directory cannot be locked"), and its job measures no more.
        assert not locks.exists() or not list(locks.iterdir()), list(locks.iterdir())
        assert not running_in(work), "the A/B job still runs"
    finally:
        for pid in running_in(work):  # what a failure left measuring
            os.kill(pid, signal.SIGKILL)


def running_in(work: Path) -> list[int]:
    """The processes whose command line names `work` (a job's script lives in it)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().decode(errors="replace")
        except OSError:  # it ended meanwhile
            continue
        if str(work) in text:
            found.append(int(cmdline.parent.name))
    return found
