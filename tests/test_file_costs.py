"""The parallel tier starts its files costliest first (tests/file_costs.py,
tests/conftest.py), and pytest-xdist keeps that order (the Makefile)."""

from __future__ import annotations

import re

import pytest

from tests import file_costs
from tests.conftest import REPO

DURATIONS = """\
============================= slowest durations ==============================
75.20s setup    tests/test_e2e.py::test_report_is_schema_valid_and_complete
3.10s call     tests/test_e2e.py::test_report_is_schema_valid_and_complete
0.40s teardown tests/test_e2e.py::test_rerun[a-1]
12.00s call     tests/gpu/test_checks.py::test_standalone_times_of_real_cases_are_of_the_same_order
0.01s call     tests/test_stats.py::test_median
(2 durations < 0.005s hidden.  Use -vv to show these durations.)
"""


def test_a_runs_durations_are_summed_per_file():
    assert file_costs.per_file(DURATIONS) == pytest.approx(
        {"tests/test_e2e.py": 78.7, "tests/gpu/test_checks.py": 12.0,
         "tests/test_stats.py": 0.01})


def test_a_file_the_table_lacks_costs_as_its_kinds_median():
    table = {"tests/a.py": 300.0, "tests/b.py": 100.0, "tests/c.py": 20.0, "tests/u.py": 0.5}
    kinds = {"tests/a.py": 0, "tests/b.py": 0, "tests/c.py": 0, "tests/u.py": 2,
             "tests/new_e2e.py": 0, "tests/new_tool.py": 1}
    assert file_costs.estimate("tests/b.py", 0, table, kinds) == 100.0
    assert file_costs.estimate("tests/new_e2e.py", 0, table, kinds) == 100.0
    assert file_costs.estimate("tests/new_tool.py", 1, table, kinds) == 0.0  # none alike


def test_the_table_is_the_generators_output(tmp_path, capsys):
    table = file_costs.read_table()
    assert table, f"{file_costs.TABLE}: no seconds per file"
    assert list(table.values()) == sorted(table.values(), reverse=True)
    assert file_costs.read_table(tmp_path / "absent.json") == {}
    text = tmp_path / "durations.txt"
    text.write_text(DURATIONS)
    assert file_costs.main([str(text)]) == 0
    out = capsys.readouterr().out
    assert '"tests/test_e2e.py": 78.7' in out
    text.write_text("no durations here\n")
    assert file_costs.main([str(text)]) == 2
    assert f"{text}: no `--durations=0` lines" in capsys.readouterr().err


def test_the_parallel_tier_keeps_the_costliest_first_order():
    """pytest-xdist's --dist loadfile reorders files by their number of tests unless told
    not to: the e2e files (few tests, minutes each) then start last."""
    recipe = re.search(r"^test:.*?(?=^\S)", (REPO / "Makefile").read_text(), re.M | re.S)
    assert recipe, "Makefile: no `test` target"
    line = " ".join(recipe.group(0).replace("\\\n", " ").split())
    assert "--dist loadfile --no-loadscope-reorder" in line, line
