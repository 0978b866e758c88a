"""Helpers for e2e test modules that share one Snakemake run among their tests (a
module-scoped fixture; `--dist loadfile` keeps a file's tests on one worker, in order).

Each Snakemake start costs seconds of CPU only to plan, so a test does not rerun the
shared suite "to settle the earlier tests" when the test before it already showed, by a
run that said "Nothing to be done", that it left the directory up to date; only after a
test that failed midway (or changed the directory without a last run) is the settling
run made. A test that would change the shared directory while others only read it works
on a copy (copy_suite_dir)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

_UP_TO_DATE: set[str] = set()


def up_to_date(workdir: Path) -> None:
    """Says that a run in `workdir` just said "Nothing to be done" (or completed)."""
    _UP_TO_DATE.add(str(workdir))


def settle(workdir: Path, run: Callable[[], object], *, changes: bool = True) -> None:
    """`workdir` brought up to date for a test that starts from the shared run: `run()`
    is called only when the last test did not leave it known up to date. With `changes`
    (the caller goes on to change it) it is no longer known up to date until the caller
    says so again, so that a failure midway makes the next test settle it."""
    if str(workdir) not in _UP_TO_DATE:
        run()
    if changes:
        _UP_TO_DATE.discard(str(workdir))
    else:
        _UP_TO_DATE.add(str(workdir))


def copy_suite_dir(src: Path, dst: Path) -> Path:
    """A copy of the suite directory `src` at `dst` that Snakemake finds up to date (the
    files with their mtimes, copy2; links kept as links), to be run with `src`'s own
    --configfile: the directory's suite marker and the report's params name that file,
    and a copy run with a suite file of its own would make its report again."""
    shutil.copytree(src, dst, symlinks=True)
    return dst
