"""The torch worker's uses of torch.profiler: a case's Chrome trace (the workload's
`profiler`, torchao's enable_profiler) and its per-op profile, the record's `kernels`
(issue 25; records/kernels.py gives the section its shape).

The per-op profile runs in the batch worker when the case is characterized, before its
timed invocations: after the case's first call (torch.compile's compilation) and a few
more unprofiled calls, `measurement.profile_calls` calls of the case's step (the forward
pass, or the whole training step) run under the profiler, whose overhead thus never
reaches an invocation. On the CPU each op's row is its self CPU time (its own, without
the ops it calls), so that the rows add up without counting a nested op twice. On CUDA
each row is one CUDA kernel (or copy, or fill) with its device time and the op that
launched it (issue 35): where a GPU case's time goes is in its kernels, which a host op's
name hides (one aten::mm runs a cuBLAS or CUTLASS kernel chosen by shape and dtype).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from pathlib import Path

from workflow.errors import raised_in_own_code
from workflow.records.kernels import kernels_section
from workflow.records.storage import atomic_writer

SOURCE = "torch.profiler"
# Unprofiled calls after the first one and before the profiled ones: with
# torch.compile's cudagraph modes (reduce-overhead) the second call records the graph
# and replays start at the third, as in the timing's warm-up.
WARMUP_CALLS = 2
# What the rows time: each op's self CPU time, or each CUDA kernel's device time.
CPU_MODE, CUDA_MODE = "cpu", "cuda-kernels"


def _activities(cuda: bool) -> list:
    import torch

    acts = [torch.profiler.ProfilerActivity.CPU]
    return [*acts, torch.profiler.ProfilerActivity.CUDA] if cuda else acts


def write_trace(call: Callable, sync: Callable, path: Path, *, cuda: bool) -> Path:
    """A Chrome trace of three calls, written atomically (by torch, to the temporary file's
    name): a full disk fails the case with `could not write PATH: REASON`. By torch's
    Python exporter where it has one: kineto's C++ writer only logs a failed write."""
    import torch

    with torch.profiler.profile(activities=_activities(cuda), record_shapes=True) as prof:
        for _ in range(3):
            call()
        sync()
    python_export = "use_python_export" in inspect.signature(prof.export_chrome_trace).parameters
    with atomic_writer(path) as fh:
        prof.export_chrome_trace(fh.name, **({"use_python_export": True} if python_export else {}))
    return path


def _self_device_us(event) -> float:
    # self_cuda_time_total: its older name, in the torch a SKU's own interpreter may have.
    value = getattr(event, "self_device_time_total", None)
    return event.self_cuda_time_total if value is None else value


def _rows(by_name: dict[str, dict]) -> list[dict]:
    """Rows from {name: {count, us, ...extra fields}}, largest first, with mean and share
    (of the rows' sum; None when that is 0)."""
    total_us = sum(r["us"] for r in by_name.values())
    rows = [{"name": name, "count": r["count"], "total_ms": r["us"] / 1e3,
             "mean_ms": r["us"] / 1e3 / r["count"] if r["count"] else None,
             "share": r["us"] / total_us if total_us > 0 else None,
             **{k: v for k, v in r.items() if k not in ("count", "us")}}
            for name, r in by_name.items()]
    return sorted(rows, key=lambda r: (-r["total_ms"], r["name"]))


def op_rows(events) -> list[dict]:
    """Rows of `prof.key_averages()` on the CPU: one per op (its key) with self CPU time,
    largest first: name, count (its calls in the profiled ones), total_ms (its self time
    over them), mean_ms, share."""
    import torch

    by_name: dict[str, dict] = {}
    for e in events:
        if e.device_type == torch.autograd.DeviceType.CPU and e.self_cpu_time_total > 0:
            row = by_name.setdefault(e.key, {"count": 0, "us": 0.0})
            row["count"] += e.count
            row["us"] += e.self_cpu_time_total
    return _rows(by_name)


def _launching_ops(events) -> dict[int, str]:
    """The ops a device event can name as its launcher, by id: torch links each kernel
    to the op in which it was launched by giving the kernel event that op's correlation
    id (`linked_correlation_id`); such ops are CPU events themselves linked to nothing."""
    import torch

    return {e.id: e.name for e in events
            if e.device_type == torch.autograd.DeviceType.CPU and not e.is_async
            and not getattr(e, "linked_correlation_id", 0)}


def kernel_rows(events) -> list[dict]:
    """Rows of `prof.events()` under CUDA: one per device-side event name (a kernel, a
    copy or a fill), largest first: name, count (its launches in the profiled calls),
    total_ms (its device time over them), mean_ms, share, and op: the op that launched it
    (several, comma-separated, largest first, when more than one did; None when no op
    did, e.g. a cudagraph's replay). User annotations on the device side span kernels
    counted already and are no rows, so the rows sum to the device's busy time."""
    import torch

    ops = _launching_ops(events)
    by_name: dict[str, dict] = {}
    for e in events:
        if e.device_type == torch.autograd.DeviceType.CPU or \
                getattr(e, "is_user_annotation", False):
            continue
        us = _self_device_us(e)
        row = by_name.setdefault(e.name, {"count": 0, "us": 0.0, "ops": {}})
        row["count"] += e.count
        row["us"] += us
        op = ops.get(getattr(e, "linked_correlation_id", 0))
        if op is not None:
            row["ops"][op] = row["ops"].get(op, 0.0) + us
    for row in by_name.values():
        launched = sorted(row.pop("ops").items(), key=lambda item: (-item[1], item[0]))
        row["op"] = ", ".join(name for name, _ in launched) or None
    return _rows(by_name)


def profile_ops(call: Callable, sync: Callable, m: dict, *, cuda: bool) -> dict | None:
    """The case's `kernels`: WARMUP_CALLS unprofiled calls, then m["profile_calls"] calls
    under torch.profiler, per op (op_rows); `seconds` is the wall time of it all. None
    when the SKU's measurement says `profile: false`. The profiler's or the step's failure
    is the section's `error` (the case is measured all the same); our own bug raises."""
    if not m["profile"]:
        return None
    # torch.profiler imports torch._dynamo when it starts (about 2 s the first time in a
    # process), which the graph statistics' torch.export imports in this pass anyway: paid
    # here, it would read as the profile's cost.
    import torch._dynamo  # noqa: F401
    import torch.profiler

    mode, calls = (CUDA_MODE if cuda else CPU_MODE), m["profile_calls"]
    start = time.perf_counter()
    try:
        for _ in range(WARMUP_CALLS):
            call()
        sync()
        with torch.profiler.profile(activities=_activities(cuda)) as prof:
            # The profiled calls' own time (the profiler's start and stop outside it):
            # what their rows must fit in (records/kernels.implausible).
            looped = time.perf_counter()
            for _ in range(calls):
                call()
            sync()
            looped = time.perf_counter() - looped
        # Each event, for the kernels' links to their ops; per op (key_averages) on the CPU.
        events = prof.events() if cuda else prof.key_averages()
    except Exception as exc:
        if raised_in_own_code(exc):
            raise
        return kernels_section(source=SOURCE, mode=mode, calls=calls, rows=[],
                               seconds=time.perf_counter() - start,
                               error=f"{type(exc).__name__}: {str(exc)[:300]}")
    return kernels_section(source=SOURCE, mode=mode, calls=calls,
                           rows=kernel_rows(events) if cuda else op_rows(events),
                           seconds=time.perf_counter() - start,
                           call_ms=looped * 1e3 / calls if calls else None)
