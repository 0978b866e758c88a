"""IREE command lines and output parsing: iree-compile and iree-benchmark-module.

Pure functions build argument lists and parse outputs; the stage functions in
stages.py run them.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

# numpy dtype name (or torch's, for bf16) -> IREE element type of --input.
IREE_ELEMENT_TYPES = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
    "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "ui8", "bool": "i1",
}
TIME_UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def compiler_version() -> str:
    """The installed iree-base-compiler version (a params: of the compile rule)."""
    return metadata.version("iree-base-compiler")


def runtime_version() -> str:
    return metadata.version("iree-base-runtime")


def compile_flags(sku: dict, input_type: str = "torch") -> list[str]:
    """iree-compile flags of a SKU (its `iree` section), the input type included
    (torch for exported models; benchmark files' MLIR may be of any dialect: auto)."""
    iree = sku["iree"]
    return [
        f"--iree-input-type={input_type}",
        "--iree-hal-target-device=local",
        f"--iree-hal-local-target-device-backends={iree['target_backend']}",
        f"--iree-llvmcpu-target-cpu={iree['target_cpu']}",
        *iree["compile_flags"],
    ]


def compile_argv(tool: str, mlir: str, vmfb: str, flags: list[str], stats_file: str) -> list[str]:
    return [
        tool, mlir, *flags,
        "--iree-scheduling-dump-statistics-format=json",
        f"--iree-scheduling-dump-statistics-file={stats_file}",
        "-o", vmfb,
    ]


def parse_compile_statistics(text: str) -> dict:
    """Dispatch and executable counts from --iree-scheduling-dump-statistics-format=json.

    The file holds one object per stream aggregate; counts are summed over them.
    """
    data = json.loads(text)
    dispatches = executables = 0
    for agg in data.values():
        dispatches += int(agg.get("execution", {}).get("dispatch-count", 0))
        executables += int(agg.get("executable", {}).get("executable-count", 0))
    return {"dispatch_count": dispatches, "executable_count": executables}


def device_flags(sku: dict) -> list[str]:
    iree = sku["iree"]
    flags = [f"--device={iree['device']}"]
    if iree["device"] == "local-task" and iree["task_topology_max_group_count"]:
        flags.append(f"--task_topology_max_group_count={iree['task_topology_max_group_count']}")
    return flags


def benchmark_argv(
    tool: str, vmfb: str, function: str, inputs: list[str], sku: dict, *,
    repetitions: int, warmup_s: float, min_time: str,
    modules: list[str] = (), extra_flags: list[str] = (),
) -> list[str]:
    """`modules` are loaded before `vmfb` (pipelines calling into them); `extra_flags`
    (--parameters, a benchmark file's own flags) come after benchflow's timing flags, so
    that a file's --benchmark_min_time wins, but never after --benchmark_format=json."""
    return [
        tool, *(f"--module={m}" for m in modules), f"--module={vmfb}", f"--function={function}",
        *device_flags(sku),
        *(f"--input={i}" for i in inputs),
        f"--benchmark_repetitions={repetitions}",
        f"--benchmark_min_warmup_time={warmup_s:g}",
        f"--benchmark_min_time={min_time}",
        *extra_flags,
        "--benchmark_format=json",
    ]


@dataclass
class BenchmarkRun:
    """One iree-benchmark-module invocation."""

    repetition_ms: list[float]   # real time per iteration of each repetition
    aggregates_ms: dict           # mean / median / stddev in ms as Google Benchmark computed them
    cv: float | None              # the `cv` aggregate: a fraction (aggregate_unit "percentage")
    context: dict                 # load_avg, cpu scaling, num_cpus, ...

    @property
    def median_ms(self) -> float:
        return float(statistics.median(self.repetition_ms))


def parse_benchmark_json(text: str) -> BenchmarkRun:
    """Parses `--benchmark_format=json` output of iree-benchmark-module.

    Repetition entries have run_type "iteration"; aggregates have run_type "aggregate".
    Times are per iteration in `time_unit`. The `cv` aggregate has aggregate_unit
    "percentage" and its real_time holds a fraction (0.05 = 5 %), not a time: it must
    not be unit-converted like the others.
    """
    data = json.loads(text)
    reps: list[float] = []
    aggs: dict[str, float] = {}
    cv = None
    for b in data.get("benchmarks", []):
        if b.get("error_occurred"):
            raise ValueError(f"benchmark {b.get('name')} failed: {b.get('error_message')}")
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_unit") == "percentage":
                if b.get("aggregate_name") == "cv":
                    cv = float(b["real_time"])
                continue
            aggs[b["aggregate_name"]] = float(b["real_time"]) * TIME_UNIT_MS[b["time_unit"]]
        else:
            reps.append(float(b["real_time"]) * TIME_UNIT_MS[b["time_unit"]])
    if not reps:
        raise ValueError("no repetition entries in iree-benchmark-module output")
    ctx = {k: v for k, v in data.get("context", {}).items() if k != "caches"}
    return BenchmarkRun(repetition_ms=reps, aggregates_ms=aggs, cv=cv, context=ctx)


def write_input_files(npz_path: str, dtypes: list[str], out_dir: Path) -> list[str]:
    """Writes each saved input as raw bytes and returns `--input` values (SHAPExTYPE=@file).

    Raw files with an explicit type handle bf16, which .npy cannot hold.
    """
    out = []
    with np.load(npz_path) as npz:
        for i, dtype in enumerate(dtypes):
            arr = npz[f"arg{i}"]
            if dtype == "bfloat16":
                # Stored widened to f32 (exact); bf16 is the upper half of the f32 bits.
                arr = (np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32) >> 16)
                arr = arr.astype(np.uint16)
            path = out_dir / f"arg{i}.bin"
            np.ascontiguousarray(arr).tofile(path)
            dims = "x".join(str(d) for d in arr.shape)
            etype = IREE_ELEMENT_TYPES[dtype]
            out.append(f"{dims}x{etype}=@{path}" if dims else f"{etype}=@{path}")
    return out
