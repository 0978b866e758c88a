"""A CUDA case's nsys profile is held against the time its own calls took
(backends/iree/gpu_kernels.py passes call_ms, records/kernels.implausible judges): no GPU
here, so the stand-in nsys of tests/test_gpu_kernels.py, wrapped to print what nsys and the
profiled iree-benchmark-module print on stdout (nsys's own lines around the program's
Google Benchmark JSON, tests/data/iree_benchmark_module.json)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.test_gpu_kernels import DATA, TABLE, M, _cuda_argv, _dispatches
from workflow.backends.iree import gpu_kernels
from workflow.backends.iree.gpu_kernels import benchmark_json
from workflow.backends.iree.profile import call_ms
from workflow.jobs.kernels import profiled_kernels

BENCH_JSON = Path(__file__).resolve().parent / "data" / "iree_benchmark_module.json"
# What nsys itself prints around the program's output (Nsight Systems 2024).
WRAPPER = """#!/bin/sh
if [ "$1" = profile ]; then
    echo "Collecting data..."
    cat "$BENCH_JSON"
    echo "Generating '/tmp/nsys-report-1234.qdstrm'"
    echo "[1/1] [========================100%] profile.nsys-rep"
fi
exec "$(dirname "$0")/nsys-fake" "$@"
"""


def _scaled(factor: float) -> str:
    """The real benchmark JSON with every time multiplied by `factor`."""
    data = json.loads(BENCH_JSON.read_text())
    for b in data["benchmarks"]:
        if b.get("aggregate_unit") != "percentage":
            for key in ("real_time", "cpu_time"):
                b[key] *= factor
    return json.dumps(data, indent=2) + "\n"


@pytest.fixture
def nsys_printing(tmp_path, monkeypatch) -> Path:
    bin_dir, seen = tmp_path / "bin", tmp_path / "seen"
    bin_dir.mkdir()
    seen.mkdir()
    shutil.copy(DATA / "nsys", bin_dir / "nsys-fake")
    (bin_dir / "nsys").write_text(WRAPPER)
    for name in ("nsys", "nsys-fake"):
        os.chmod(bin_dir / name, 0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_NSYS_DIR", str(seen))
    monkeypatch.setenv("FAKE_NSYS_TABLE", str(TABLE))
    monkeypatch.setenv("BENCH_JSON", str(BENCH_JSON))
    return tmp_path


def test_the_programs_json_is_found_among_nsys_lines():
    text = BENCH_JSON.read_text()
    mixed = f"Collecting data...\n{text}\nGenerating '/tmp/x.qdstrm'\n"
    assert call_ms(benchmark_json(mixed)) == pytest.approx(call_ms(text))
    assert benchmark_json("Collecting data...\nGenerating x\n") == ""
    # A program output without its final newline runs into nsys's next line.
    assert benchmark_json('x\n{"benchmarks": []}Generating y\n') == '{"benchmarks": []}'
    assert benchmark_json("{ not json\n") == ""
    assert call_ms(benchmark_json("}\n{")) is None


@pytest.mark.tool
def test_a_cuda_profile_within_its_calls_time_stands(nsys_printing, tmp_path):
    # The table's kernels: 0.17152 ms over 10 calls; each call took ~0.67 ms by the JSON.
    section = profiled_kernels(_cuda_argv(tmp_path), M, 60, str(tmp_path / "log"),
                               dispatches=_dispatches())
    assert section["error"] is None and section["rows"]
    assert section["total_ms"] == pytest.approx(0.17152)
    # The time it was held to: the program's own, read through nsys's lines.
    out = gpu_kernels.profile_gpu_case(_cuda_argv(tmp_path), timeout=60, iterations=10)
    assert out["call_ms"] == pytest.approx(call_ms(BENCH_JSON.read_text()))


@pytest.mark.tool
def test_a_cuda_profile_far_above_its_calls_time_is_marked(nsys_printing, tmp_path):
    # The same kernels, but the calls took a thousandth of that: they cannot have run in
    # those calls (another process's kernels, a unit read wrongly).
    scaled = tmp_path / "fast.json"
    scaled.write_text(_scaled(1e-3))
    os.environ["BENCH_JSON"] = str(scaled)  # monkeypatch restores it
    section = profiled_kernels(_cuda_argv(tmp_path), M, 60, str(tmp_path / "log"),
                               dispatches=_dispatches())
    assert section["error"].startswith("implausible profile: its rows sum to")
    assert section["rows"] and section["total_ms"] == pytest.approx(0.17152)
