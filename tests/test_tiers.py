"""The tier markers are true (tests/conftest.py): a test that starts a process without
one fails, naming what it started; with one it passes."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

pytest_plugins = ["pytester"]

PROBE = '''
import subprocess
import pytest

def test_unmarked():
    subprocess.run(["true"])

@pytest.mark.tool
def test_marked():
    subprocess.run(["true"])

def test_in_process():
    assert sum(range(4)) == 6
'''


@pytest.mark.tool  # the inner tests start `true` inside this one
def test_a_process_started_without_a_marker_fails_the_test(pytester):
    pytester.makeconftest((REPO / "tests/conftest.py").read_text())
    pytester.makeini("[pytest]\nmarkers =\n    e2e: x\n    tool: x\n    browser: x\n"
                     "    slurm: x\n")
    pytester.makepyfile(test_probe=PROBE)
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*test_unmarked started processes but carries none of the "
                                 "markers*subprocess.Popen: *'true'*"])
