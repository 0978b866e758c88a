"""Shared fixtures: the repository root, tiny suites, and a snakemake runner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"

# Small enough for seconds per case, large enough to exercise every protocol step (a
# fixed count: tests of the adaptive plan set max_invocations themselves).
FAST_MEASUREMENT = {"invocations": 3, "max_invocations": 3, "repetitions": 3,
                    "min_warmup_time_s": 0.05, "min_time_s": 0.01}


def tiny_suite(**overrides) -> dict:
    suite = {
        "suite_name": "tiny",
        "skus": {
            "host": {"iree": {"target_cpu": "host"}, "measurement": dict(FAST_MEASUREMENT)},
            "generic": {"iree": {"target_cpu": "generic", "device": "local-sync"},
                        "measurement": dict(FAST_MEASUREMENT)},
        },
        "workloads": [
            {"model": "linear", "shapes": [[16, 32, 32]]},
            {"model": "ln_linear_relu", "shapes": [[16, 32, 64]]},
        ],
    }
    suite.update(overrides)
    return suite


def write_suite(path: Path, suite: dict) -> Path:
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


def snakemake(workdir: Path, *args: str, env: dict | None = None, check: bool = True):
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
           "--directory", str(workdir), "--cores", "2", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture
def repo() -> Path:
    return REPO
