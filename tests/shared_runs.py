"""What end-to-end test files share so that a run repeats no work its assertions never
look at (each Snakemake start costs seconds of CPU just to plan, each torch import more).

- One Snakemake run per file, made by a module-scoped fixture (`--dist loadfile` keeps a
  file's tests on one worker, in order): a test does not rerun the shared suite "to settle
  the earlier tests" when the test before it already showed, by a run that said "Nothing
  to be done", that it left the directory up to date (settle); only after a test that
  failed midway (or changed the directory without a last run) is the settling run made.
  A test that would change the shared directory while others only read it works on a
  copy (copy_suite_dir).
- results/peak.json as an earlier run there left it (an_earlier_runs_peak), for a test
  whose run builds the renders but asserts nothing of the peak.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable
from pathlib import Path

from workflow import paths
from workflow.records.storage import write_json

_UP_TO_DATE: set[str] = set()
_PEAK: dict = {}


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


def an_earlier_runs_peak(workdir: Path) -> Path:
    """results/peak.json in `workdir`, as an earlier run there left it. A run whose suite
    times a case on this CPU otherwise starts with measure_peak (plan.peak_input): a
    job that imports torch and holds every core and the bench slot for seconds (numpy
    and torch matmuls at three sizes, 0.5 s each), in every e2e test that builds the
    renders or the history. Snakemake takes the file as it is (the rule has no input),
    as it does in a results directory a run has filled.

    Measured (backends/peak.measure, at one size and a short budget) once per test
    process, not written by hand: the tests that use it assert nothing about the
    peak, and a percent-of-peak figure still divides by a real measurement."""
    if not _PEAK:
        from workflow.backends import peak

        _PEAK.update(peak.measure(sizes=(512,), repeats=3, budget_s=0.05))
    path = workdir / paths.PEAK
    write_json(path, copy.deepcopy(_PEAK))
    return path
