"""Per-kernel GPU time of an IREE module on CUDA (issue 35): which dispatch took the time
where IREE's own HAL profiling cannot say (its CUDA driver answers `UNIMPLEMENTED; CUDA
HAL-native profiling is not implemented`, seen on an H100 with iree-base-runtime 3.13).

IREE's CUDA target names each kernel after its dispatch function, with every character
other than a letter, digit or `_` made `_`: the function
`main$async_dispatch_2_matmul_128x256x256_f32` is the PTX `.entry`
`main_async_dispatch_2_matmul_128x256x256_f32` (iree-compile 3.13 for sm_80, its PTX
dumped with --iree-hal-dump-executable-binaries-to). So an NVIDIA tool's per-kernel
table is joined to the module's dispatch functions by that name (kernel_name).

Which tool, in this order (TOOLS), the first one on PATH:
- Nsight Systems (`nsys profile --trace=cuda`, then `nsys stats --report
  cuda_gpu_kern_sum --format csv`): CUPTI's kernel activity records, each kernel's start
  and end on the GPU as the program ran (kernels still overlap and stay asynchronous), at
  a small cost per launch; one table per kernel name with instances and total, min and
  max time. It ships with the CUDA toolkit and HPC images, so a GPU node usually has it.
- Not used: Nsight Compute (`ncu --csv`) replays every kernel alone, serialised, with its
  caches flushed between passes: accurate per kernel but not the times of the run that
  was measured, and minutes for a model of hundreds of dispatches (the profile's budget
  is seconds); CUPTI through `cupti-python` profiles only its own process, while the
  profiled program here is another (iree-benchmark-module); IREE's tracy runtime variant
  needs a tracy capture server beside the run and another runtime build on the SKU.

Pure argument builders and parsers, and `profile_gpu_case`, which runs the tools through
backends/proc.py.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import tempfile
import time
from pathlib import Path

from workflow.backends.iree.profile import call_ms, merged_row, profile_argv, ranked_rows
from workflow.backends.iree.tools import TIME_UNIT_MS, tool_output
from workflow.backends.proc import run_tool
from workflow.errors import REASON_CHARS, ConfigError, StageError, capped
from workflow.files import read_bytes

# The tools looked for, in order of preference (module docstring).
TOOLS = ("nsys",)
# What the rows time: each CUDA kernel's execution on the GPU.
MODE = "cuda-kernels"
# nsys stats' report of GPU kernels, and the file `--output=BASE` gives it.
NSYS_REPORT = "cuda_gpu_kern_sum"
# A kernel that is none of the module's dispatch functions (a library's, or an
# initializer's, which runs once when the module loads): kept, named as such.
UNMATCHED = "(not a dispatch) "
# The name IREE gives a dispatch function: `<function>$async_dispatch_<N>_...` or
# `<function>_dispatch_<N>_...`; what a kernel is matched by when no dispatch list is given.
_IREE_DISPATCH = re.compile(r"dispatch_\d+(?:_|$)")
# The characters IREE's CUDA target keeps of a dispatch function's name in its kernel's.
_NOT_IN_KERNEL_NAME = re.compile(r"[^A-Za-z0-9_]")
# A `--device=` flag that names IREE's CUDA HAL driver (`cuda`, `cuda://0`).
_CUDA_DEVICE = re.compile(r"--device=cuda(?::|$)")
# A kernel summary is a line per kernel name: far below this even for a large model.
MAX_STATS_BYTES = 64 << 20
# The most of a kernel's name a row keeps (errors.capped).
NAME_CHARS = 4000
# nsys stats' column headers carry the time unit: "Total Time (ns)".
_UNIT = re.compile(r"(.+) \((ns|us|ms|s)\)")


def cuda_device(benchmark_argv: list[str]) -> bool:
    """Whether an iree-benchmark-module argv runs on IREE's CUDA driver."""
    return any(_CUDA_DEVICE.match(str(a)) for a in benchmark_argv)


def find_tool() -> tuple[str, str] | None:
    """The first of TOOLS on PATH, as (name, path); None when none is."""
    for name in TOOLS:
        found = shutil.which(name)
        if found:
            return name, found
    return None


def nsys_profile_argv(nsys: str, output: str, program: list[str]) -> list[str]:
    """`nsys profile` of `program`, writing OUTPUT.nsys-rep: CUDA API and kernel tracing
    only (no CPU sampling, no context switches: the least it can add to the run), each
    kernel of a CUDA graph on its own (`--cuda-graph-trace=node`; by default nsys times a
    graph as one range, and IREE's CUDA driver can record its command buffers as graphs)."""
    return [nsys, "profile", "--trace=cuda", "--cuda-graph-trace=node", "--sample=none",
            "--cpuctxsw=none", f"--output={output}", "--force-overwrite=true", *program]


def nsys_stats_argv(nsys: str, report: str, output: str) -> list[str]:
    """`nsys stats` writing the kernel summary of `report` as CSV to
    OUTPUT_cuda_gpu_kern_sum.csv (nsys names each report's file BASE_<report>.csv)."""
    return [nsys, "stats", f"--report={NSYS_REPORT}", "--format=csv", f"--output={output}",
            report]


def nsys_stats_file(output: str) -> Path:
    return Path(f"{output}_{NSYS_REPORT}.csv")


def _columns(header: list[str]) -> tuple[dict[str, int], float]:
    """The index of each column nsys_kernel_rows reads, and the time unit in ms."""
    index, units = {}, set()
    for i, column in enumerate(header):
        found = _UNIT.fullmatch(column.strip())
        if found:
            index[found.group(1)] = i
            units.add(found.group(2))
        else:
            index[column.strip()] = i
    missing = [c for c in ("Total Time", "Instances", "Min", "Max", "Name") if c not in index]
    if missing or len(units) != 1:
        raise ValueError(
            f"header {header!r}: expected nsys stats' {NSYS_REPORT} columns \"Time (%)\", "
            "\"Total Time (ns)\", \"Instances\", \"Avg (ns)\", \"Med (ns)\", \"Min (ns)\", "
            "\"Max (ns)\", \"StdDev (ns)\", \"Name\" (times in one unit: ns, us, ms or s)")
    return index, TIME_UNIT_MS[units.pop()]


def _time(row: list[str], index: dict[str, int], column: str, unit_ms: float) -> float:
    value = float(row[index[column]])
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{column}: {row[index[column]]!r}; expected a non-negative time")
    return value * unit_ms


def _csv_lines(text: str) -> list[list[str]]:
    """The records of a CSV table as nsys stats writes it (RFC 4180: fields quoted with
    `"`, a quote doubled inside one, every record ending in a newline), blank lines
    dropped. A table cut short is refused, never read as the rows it still has: a last
    row cut inside (kernel `main_async_dis`), or a quote left open (strict csv). A table
    without its last newline whose last row is whole (the header's number of fields, its
    last one, the kernel's quoted name, closed) is read: the newline alone is no row."""
    if not text.strip():
        raise ValueError(f"empty; expected nsys stats' {NSYS_REPORT} CSV")
    if not text.endswith("\n"):
        tail = text.rsplit("\n", 1)[-1]
        if not _whole_row(tail, text.split("\n", 1)[0]):
            raise ValueError(f"truncated: the table does not end with a newline, and its "
                             f"last row is cut short: {capped(repr(tail), 200)}")
        text += "\n"
    try:
        return [row for row in csv.reader(text.splitlines(keepends=True), strict=True)
                if row]
    except csv.Error as exc:
        # csv's words for a quote that never closes: "unexpected end of data".
        why = " (a quoted field left open)" if "end of data" in str(exc) else ""
        raise ValueError(f"truncated or not CSV: {exc}{why}") from None


def _whole_row(line: str, header: str) -> bool:
    """Whether `line`, a table's last line without its newline, is a whole row: as many
    fields as the header, quotes closed, and its last field quoted (its closing quote
    is the row's end; an unquoted one may have been cut anywhere)."""
    try:
        row, head = (next(csv.reader([x], strict=True)) for x in (line, header))
    except (csv.Error, StopIteration):
        return False
    return len(row) == len(head) and line.endswith('"') and line.count('"') % 2 == 0


def nsys_kernel_rows(text: str) -> list[dict]:
    """The rows of `nsys stats --report cuda_gpu_kern_sum --format csv`: one per kernel
    name, {name, count (instances), total_ms, min_ms, max_ms}, in the file's order (times
    converted from the unit its header names). Anything that is not such a table raises
    ValueError."""
    lines = _csv_lines(text)
    index, unit_ms = _columns(lines[0])
    rows = []
    with tool_output(f"nsys stats' {NSYS_REPORT} CSV"):
        for n, row in enumerate(lines[1:], 2):
            if len(row) != len(lines[0]):
                raise ValueError(f"line {n}: {len(row)} fields; expected {len(lines[0])}, "
                                 "as the header has (a row cut short?)")
            try:
                count = int(row[index["Instances"]])
                # A kernel's name enters the record: capped, saying so (a C++ template
                # kernel's demangled name runs to hundreds of characters, not millions).
                rows.append({"name": capped(row[index["Name"]], NAME_CHARS), "count": count,
                             "total_ms": _time(row, index, "Total Time", unit_ms),
                             "min_ms": _time(row, index, "Min", unit_ms),
                             "max_ms": _time(row, index, "Max", unit_ms)})
            except ValueError as exc:
                raise ValueError(f"line {n}: {exc}") from None
            if count < 0 or not rows[-1]["name"]:
                raise ValueError(f"line {n}: instances {count}, name {rows[-1]['name']!r}; "
                                 "expected a count of at least 0 and a kernel name")
    return rows


def kernel_name(function: str) -> str:
    """The name of the CUDA kernel IREE compiles a dispatch function to (module
    docstring): `main$async_dispatch_0_...` -> `main_async_dispatch_0_...`."""
    return _NOT_IN_KERNEL_NAME.sub("_", function)


def join_dispatches(kernels: list[dict], dispatches: list[str] | None = None) -> list[dict]:
    """Kernel rows as dispatch rows, in the shape profile.dispatch_rows gives (name,
    count and time over the profiled calls, mean, min, max, share of the kernels' total,
    workgroup unknown), largest first. A kernel of one of `dispatches` (the dispatch
    functions the compiler lists) is named as that function, the name every other
    profile of the module gives it; any other kernel is kept too, its name prefixed with
    UNMATCHED, so that no time is dropped. Without a list, a kernel is a dispatch when
    its name is one IREE gives dispatch functions (`..._dispatch_<N>_...`), and keeps
    its kernel's name (whether a `_` was a `$` is not in it)."""
    functions = None if dispatches is None else {kernel_name(d): d for d in dispatches}
    by_name: dict[str, dict] = {}
    for kernel in kernels:
        name = kernel["name"]
        if functions is not None:
            name = functions.get(name, UNMATCHED + name)
        elif not _IREE_DISPATCH.search(name):
            name = UNMATCHED + name
        row = {**kernel, "name": name, "workgroup": None}  # nsys does not give it
        by_name[row["name"]] = merged_row(by_name[row["name"]], row) \
            if row["name"] in by_name else row
    return ranked_rows(by_name)


def benchmark_json(stdout: str) -> str:
    """The profiled program's Google Benchmark JSON out of nsys's stdout, which also holds
    nsys's own lines ("Collecting data...", "Generating ..."): the JSON object that starts
    on the first line opening one, up to where it ends ("" when there is none)."""
    found = re.search(r"^\{", stdout, re.MULTILINE)
    if found is None:
        return ""
    try:
        _value, end = json.JSONDecoder().raw_decode(stdout, found.start())
    except ValueError:
        return ""
    return stdout[found.start():end]


def _nsys_rows(nsys: str, program: list[str], *, timeout: float,
               log: str | None) -> tuple[list[dict], float | None]:
    """`program` run under nsys: its kernel table, and what each of its calls took by
    its own clock (profile.call_ms; None when its output gives none)."""
    with tempfile.TemporaryDirectory() as tmp:
        report, stats = str(Path(tmp) / "profile"), str(Path(tmp) / "stats")
        profiled = run_tool(nsys_profile_argv(nsys, report, program), stage="profile",
                            timeout=timeout, log=log)
        per_call = call_ms(benchmark_json(profiled.stdout or ""))
        run_tool(nsys_stats_argv(nsys, report + ".nsys-rep", stats), stage="profile",
                 timeout=timeout, log=log)
        table = nsys_stats_file(stats)
        try:
            # A tool's file: a regular file only, capped, decoded with replacement.
            text = read_bytes(table, cap=MAX_STATS_BYTES, what=f"nsys stats' {NSYS_REPORT}"
                              " CSV", os_errors=True).decode("utf-8", errors="replace")
        except FileNotFoundError:  # nsys stats skips a report without kernel data
            raise StageError("profile", f"nsys recorded no CUDA kernel: {table.name} was "
                             "not written (does the module run on the GPU?)") from None
        except (OSError, ConfigError) as exc:
            raise StageError("profile", f"unreadable nsys stats output: {exc}") from None
    try:
        return nsys_kernel_rows(text), per_call
    except ValueError as exc:
        raise StageError("profile", f"unreadable nsys stats output {table.name}: "
                         f"{capped(str(exc), REASON_CHARS)}") from None


def profile_gpu_case(benchmark_argv: list[str], *, timeout: float, log: str | None = None,
                     iterations: int, dispatches: list[str] | None = None) -> dict:
    """Profiles a CUDA case: its profiling invocation (profile.profile_argv: the same
    module, inputs and device, `iterations` calls without warm-up, no HAL profiling) run
    under the first tool of TOOLS found, its kernels joined to `dispatches`. Returns what
    profile.profile_case returns; no tool found, or a tool's failure, raises
    StageError("profile")."""
    start = time.monotonic()
    found = find_tool()
    if found is None:
        raise StageError("profile", "no per-kernel GPU timing tool found: looked for "
                         f"{', '.join(TOOLS)} on PATH (IREE's CUDA driver has no HAL "
                         "profiling)")
    tool, path = found
    program = profile_argv(benchmark_argv, None, iterations=iterations, mode=None)
    kernels, per_call = _nsys_rows(path, program, timeout=timeout, log=log)
    # call_ms: the kernels of a call must fit in the time the call took under nsys
    # (records/kernels.implausible), as iree-profile's rows must in theirs.
    return {"dispatches": join_dispatches(kernels, dispatches),
            "seconds": time.monotonic() - start, "tool": tool, "mode": MODE,
            "iterations": iterations, "call_ms": per_call}
