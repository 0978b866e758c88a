"""Per-dispatch profiles of an IREE module: which dispatch took the time.

A measured case is profiled by one more iree-benchmark-module invocation of the same
module, function, inputs and device (never counted in its timing) with HAL profiling on:
`--device_profiling_mode=host-execution,executable-metadata` writes a .ireeprof bundle,
and `iree-profile dispatch --format=jsonl` reduces it to one row per dispatch function
(count, min/avg/max/total time, workgroup geometry). `host-execution` is what the local
HAL (local-sync, local-task) supports; its `dispatch-events` (device timestamps) is
refused (UNIMPLEMENTED), and a device that supports neither fails the invocation, which
becomes StageError("profile", ...). IREE's CUDA driver supports neither: a CUDA case's
kernels are timed by NVIDIA's tools instead (gpu_kernels.py), on the same invocation.

A compile-only case (a GPU target on a machine without its GPU) has no times, but the
compiler names its dispatches: `--iree-scheduling-dump-statistics-format=csv` (the format
tools.compile_argv asks for: tools.statistics_flags) lists every dispatch of each stream
execution region by its function name (the JSON format has only counts).
`compile_statistics` reads that file: the compile stage's counts and dispatch list.

Pure argument builders and parsers, and `profile_case`, which runs the tools through
backends/proc.py.
"""

from __future__ import annotations

import csv
import json
import math
import tempfile
import time
from pathlib import Path

from workflow.backends.iree.tools import parse_benchmark_json, tool_output
from workflow.backends.proc import run_tool, tool_path
from workflow.errors import StageError

# The profiling data family: `host-execution` on the local HAL; a GPU HAL may support
# `dispatch-events` (device timestamps) instead: a parameter, the local one by default.
MODE = "host-execution"
# One repetition of a fixed number of calls, without warm-up: Google Benchmark's warm-up
# calls are profiled too (an unknown number of them: 269 calls in 0.05 s of warm-up for
# ln_linear_gelu), while `Nx` runs exactly N, so a row's count is N x its dispatch sites.
ITERATIONS = 10
# The case's own timing flags, replaced by the profile's (Google Benchmark takes the last
# of a repeated flag, but an argv that says one thing is easier to read in a log).
_TIMING_FLAGS = ("--benchmark_repetitions=", "--benchmark_min_warmup_time=",
                 "--benchmark_min_time=", "--device_profiling_")
# iree-profile's groups: device-timestamped (dispatch-events) and host-timed.
DEVICE_GROUP, HOST_GROUP = "dispatch_group", "host_dispatch_group"


def profile_argv(benchmark_argv: list[str], output: str | None, *,
                 iterations: int = ITERATIONS, repetitions: int = 1,
                 mode: str | None = MODE) -> list[str]:
    """The profiling invocation of a case: its iree-benchmark-module argv (module,
    function, inputs, device flags, a benchmark file's own flags) with the timing flags
    replaced by `repetitions` x `iterations` calls without warm-up, and the profiling
    flags writing the bundle to `output` (executable-metadata: without it the bundle
    has no function names to key the rows by). With `mode` None, no HAL profiling
    flags: the invocation another profiler runs (gpu_kernels.py)."""
    if iterations < 1 or repetitions < 1:
        raise ValueError(f"iterations and repetitions must be >= 1, not {iterations}, "
                         f"{repetitions}")
    kept = [a for a in benchmark_argv if not str(a).startswith(_TIMING_FLAGS)]
    calls = [f"--benchmark_repetitions={repetitions}", "--benchmark_min_warmup_time=0",
             f"--benchmark_min_time={iterations}x"]
    if mode is None:
        return [*kept, *calls]
    return [*kept, *calls, f"--device_profiling_mode={mode},executable-metadata",
            f"--device_profiling_output={output}"]


def profile_tool(benchmark_tool: str) -> str:
    """iree-profile of the same build as the benchmark tool: its sibling binary (the
    installed runtime package keeps both in iree/_runtime_libs; a SKU's own build has
    both in its bin directory), else the console script of this environment. The
    binary, because the console script is a Python trampoline (benchmark_tool's why)."""
    sibling = Path(benchmark_tool).with_name("iree-profile")
    return str(sibling) if sibling.is_file() else tool_path("iree-profile")


def dispatch_argv(tool: str, bundle: str) -> list[str]:
    return [tool, "dispatch", "--format=jsonl", bundle]


def _number(group: dict, key: str) -> float:
    value = group[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or value < 0:
        raise ValueError(f"{key}: {value!r}; expected a non-negative number")
    return float(value)


def _geometry(group: dict) -> dict | None:
    """The workgroup count and size of the group's last dispatch, as iree-profile gives
    them ([x, y, z] each); None when it gives none."""
    out = {}
    for key, field in (("count", "last_workgroup_count"), ("size", "last_workgroup_size")):
        value = group.get(field)
        if value is None:
            continue
        if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise ValueError(f"{field}: {value!r}; expected a list of integers")
        out[key] = value
    return out or None


def _group_row(group: dict) -> dict:
    name = group["key"]
    if not isinstance(name, str) or not name:
        raise ValueError(f"key: {name!r}; expected a dispatch function's name")
    # `valid`: the timed events; an invalid one (no usable timestamps) is in `count` but
    # has no time in the totals.
    count = group["count"]
    timed = group.get("valid", count)
    for key, value in (("count", count), ("valid", timed)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name}: {key} {value!r}; expected a non-negative integer")
    return {"name": name, "count": timed, "total_ms": _number(group, "total_ns") * 1e-6,
            "min_ms": _number(group, "min_ns") * 1e-6, "max_ms": _number(group, "max_ns") * 1e-6,
            "workgroup": _geometry(group)}


def merged_row(a: dict, b: dict) -> dict:
    """Two rows of one dispatch function (its groups of several physical devices or
    executables, or its kernels) as one."""
    return {**a, "count": a["count"] + b["count"], "total_ms": a["total_ms"] + b["total_ms"],
            "min_ms": min(a["min_ms"], b["min_ms"]), "max_ms": max(a["max_ms"], b["max_ms"])}


def ranked_rows(by_name: dict[str, dict]) -> list[dict]:
    """Rows by dispatch function ({name: {count, total_ms, min_ms, max_ms, workgroup}})
    in the record's shape, largest first, each with its mean and its share of the rows'
    total (None when that is 0)."""
    total = sum(r["total_ms"] for r in by_name.values())
    rows = sorted(by_name.values(), key=lambda r: (-r["total_ms"], r["name"]))
    return [{"name": r["name"], "count": r["count"], "total_ms": r["total_ms"],
             "mean_ms": r["total_ms"] / r["count"] if r["count"] else None,
             "min_ms": r["min_ms"], "max_ms": r["max_ms"],
             "share": r["total_ms"] / total if total > 0 else None,
             "workgroup": r.get("workgroup")} for r in rows]


def _jsonl_objects(text: str) -> list[dict]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError(f"line {n}: {type(row).__name__}; expected a JSON object")
            rows.append(row)
    return rows


def dispatch_rows(text: str) -> list[dict]:
    """Rows of `iree-profile dispatch --format=jsonl` output, one per dispatch function:
    name, count (timed calls), total/mean/min/max in ms, workgroup geometry, and share
    (of the profile's total dispatch time; None when that total is 0), sorted by total
    time descending. Device-timestamped groups are taken where the profile has any,
    else the host-timed ones (the local HAL's). Anything that is not such output raises
    ValueError."""
    with tool_output("iree-profile dispatch JSONL"):
        objects = _jsonl_objects(text)
        if not any(o.get("type") == "dispatch_summary" for o in objects):
            raise ValueError("no dispatch_summary row; expected iree-profile dispatch output")
        groups = [o for o in objects if o.get("type") == DEVICE_GROUP] or \
            [o for o in objects if o.get("type") == HOST_GROUP]
        by_name: dict[str, dict] = {}
        for group in groups:
            row = _group_row(group)
            by_name[row["name"]] = merged_row(by_name[row["name"]], row) \
                if row["name"] in by_name else row
    return ranked_rows(by_name)


def profile_case(benchmark_argv: list[str], *, timeout: float, log: str | None = None,
                 workdir: str | Path | None = None, iterations: int = ITERATIONS,
                 mode: str = MODE) -> dict:
    """Profiles a case: one profiling invocation of its benchmark argv, then iree-profile
    on the bundle. The bundle is written to `workdir` (kept) or to a temporary directory
    (removed). Returns the rows and the wall-clock cost of both tools; a tool's failure
    (a device without host-execution profiling, a timeout) raises StageError("profile")."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        bundle = str(Path(workdir or tmp) / "profile.ireeprof")
        argv = profile_argv(benchmark_argv, bundle, iterations=iterations, mode=mode)
        try:
            invocation = run_tool(argv, stage="profile", timeout=timeout, log=log)
        except StageError as exc:
            raise StageError("profile", f"profiling ({mode}) failed: {exc.message}") from None
        tool = profile_tool(str(benchmark_argv[0]))
        out = run_tool(dispatch_argv(tool, bundle), stage="profile", timeout=timeout, log=log)
    try:
        rows = dispatch_rows(out.stdout)
    except ValueError as exc:
        raise StageError("profile", f"unreadable iree-profile output: {exc}") from None
    return {"dispatches": rows, "seconds": time.monotonic() - start, "tool": "iree-profile",
            "mode": mode, "iterations": iterations, "call_ms": call_ms(invocation.stdout)}


def call_ms(benchmark_output: str) -> float | None:
    """What each call of a profiling invocation took, profiling on, by Google Benchmark's
    clock (its repetitions' mean real time per iteration; the case's argv asks for JSON):
    the time the invocation's dispatch rows must fit in. None when its output gives none
    (then nothing is held against the rows)."""
    try:
        reps = parse_benchmark_json(benchmark_output).repetition_ms
    except ValueError:
        return None
    return sum(reps) / len(reps) if reps else None


# --- compile-only: the dispatch list of the compiler's statistics -------------------------

def _function_name(symbol: str) -> str:
    """`@main$async_dispatch_0::@main$async_dispatch_0_reduction_128x256_f32` -> the
    function (the name the runtime profile keys its rows by)."""
    name = symbol.rsplit("::", 1)[-1].removeprefix("@")
    if not name:
        raise ValueError(f"dispatch symbol {symbol!r}; expected @executable::@function")
    return name


def _csv_line(line: str) -> list[str]:
    try:
        # strict: a quote left open (a file cut inside a quoted symbol) is an error, not
        # a field that runs to the end of the line (issue 47).
        return next(csv.reader([line], strict=True))
    except csv.Error as exc:  # a NUL, a field past csv's size limit: not the tool's file
        raise ValueError(f"{line[:80]!r}: {exc}") from None


def _csv_tables(text: str):
    """(section comment, header, row) of every data row of the CSV statistics: sections
    start with `; <where>` comment lines, tables with a quoted header row."""
    where, header = "", None
    for line in text.splitlines():
        if not line.strip():
            header = None
        elif line.startswith(";"):
            where = line.lstrip("; ").strip() or where
        elif header is None:
            header = _csv_line(line)
        else:
            row = _csv_line(line)
            if len(row) != len(header):
                raise ValueError(f"{line[:80]!r}: {len(row)} fields; expected {len(header)}")
            yield where, header, dict(zip(header, row, strict=True))


def compile_statistics(text: str) -> dict:
    """The CSV statistics of iree-compile: the dispatch and executable counts of the
    whole program (the JSON format's dispatch-count and executable-count, equal),
    and `dispatches`, the dispatch functions a call of a public function runs, in
    order, each {name, count} (count: its dispatch sites in the execution regions;
    initializers, which run once when the module loads and are never profiled, left
    out). Text that is not such a file raises ValueError."""
    if text.strip() and not text.endswith("\n"):
        # The compiler ends every line; a file that does not was cut short, and its last
        # row would name half a dispatch function.
        raise ValueError(f"truncated: does not end with a newline; its last line is "
                         f"{text.rsplit(chr(10), 1)[-1][:80]!r}")
    counts = {"dispatch_count": 0, "executable_count": 0}
    sites: dict[str, int] = {}
    aggregates = 0
    with tool_output("iree-compile's CSV statistics"):
        for where, header, row in _csv_tables(text):
            if "Dispatches" in header and "Executables" in header:
                aggregates += 1
                counts["dispatch_count"] += int(row["Dispatches"])
                counts["executable_count"] += int(row["Executables"])
            elif row.get("Command") == "dispatch" and "util.initializer" not in where:
                name = _function_name(row["Symbol"])
                sites[name] = sites.get(name, 0) + 1
    if not aggregates:
        raise ValueError("no aggregate statistics row; expected iree-compile's CSV statistics")
    return {**counts, "dispatches": [{"name": n, "count": c} for n, c in sites.items()]}

