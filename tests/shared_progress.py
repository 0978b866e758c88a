"""Setup shared by the progress and end-to-end test files (test_progress.py,
test_progress_truth.py, test_history_e2e.py): what an earlier run in a directory leaves
there, so that a test's run does not repeat work its assertions never look at."""

from __future__ import annotations

import copy
from pathlib import Path

from workflow import paths
from workflow.records.storage import write_json

_PEAK: dict = {}


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
