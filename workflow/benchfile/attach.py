"""What a suite runs of the benchmark formats, kept on it (suite.benchmark_files): its
sharktank-format files (select.py) and its iree-test-suites torch_models tests
(torch_plan.py), one Selection of cases and skips.

Its own module because torch_plan adds its tests to select's Selection: select.py
importing torch_plan for this would make the two modules need each other.
"""

from __future__ import annotations

from workflow.benchfile.select import Selection, select
from workflow.benchfile.torch_plan import add_tests


def attach(suite) -> Selection:
    """Selects a suite's benchmark files and keeps them on it (suite.benchmark_files)."""
    sel = select(suite.config, suite.source)
    add_tests(sel, suite.config, suite.source)
    suite.benchmark_files = sel
    return sel
