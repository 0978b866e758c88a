"""The Makefile's defaults fit the machine it runs on."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.conftest import REPO


@pytest.mark.tool
def test_make_report_uses_this_machines_cores(tmp_path):
    """`make report` on a 2-core machine must not start 8 jobs at once (each measured
    case then shares its core with others): CORES defaults to what nproc says, the
    cores this process may run on."""
    done = subprocess.run(["make", "-n", "report", f"VENV={tmp_path / 'venv'}"], cwd=REPO,
                          capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "CORES"})
    assert done.returncode == 0, done.stderr
    (cores,) = re.findall(r"snakemake --cores (\S+) ", done.stdout)
    assert cores == str(len(os.sched_getaffinity(0)))
