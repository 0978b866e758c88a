"""The torch worker's uses of torch.profiler: a case's Chrome trace (the workload's
`profiler`, torchao's enable_profiler) and its per-op profile, the record's `kernels`
(issue 25; records/kernels.py gives the section its shape).

The per-op profile runs in the batch worker when the case is characterized, before its
timed invocations: after the case's first call (torch.compile's compilation) and a few
more unprofiled calls, `measurement.profile_calls` calls of the case's step (the forward
pass, or the whole training step) run under the profiler, whose overhead thus never
reaches an invocation. Each op's row is its self time (its own, without the ops it
calls): on the CPU, self CPU time; on CUDA, self device time (the kernels an op
launched itself), so that the rows add up without counting a nested op twice.
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
# CUDA kernels that no profiled CPU op launched (e.g. a cudagraph's replay), as one row,
# so that the rows sum to the device's total.
NO_OP = "(kernels outside any op)"


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


def op_rows(events, *, cuda: bool) -> list[dict]:
    """Rows of `prof.key_averages()`: one per op (its key) with self time, largest first:
    name, count (its calls in the profiled ones), total_ms (its self time over them),
    mean_ms, share (of the rows' sum; None when that is 0). On CUDA the time is the
    device's: CPU ops' self device time, plus one NO_OP row for the device time of
    kernels no op launched (device-side events, less user annotations, which span kernels
    counted already: as torch's own table sums them)."""
    import torch

    by_name: dict[str, list] = {}
    device_us = 0.0
    for e in events:
        if e.device_type != torch.autograd.DeviceType.CPU:
            if cuda and not getattr(e, "is_user_annotation", False):
                device_us += _self_device_us(e)
            continue
        us = _self_device_us(e) if cuda else e.self_cpu_time_total
        if us > 0:
            count_us = by_name.setdefault(e.key, [0, 0.0])
            count_us[0] += e.count
            count_us[1] += us
    outside_us = device_us - sum(us for _, us in by_name.values())
    if cuda and outside_us > 0.5:  # beyond the rounding of microsecond timestamps
        by_name[NO_OP] = [None, outside_us]
    total_us = sum(us for _, us in by_name.values())
    rows = [{"name": name, "count": count, "total_ms": us / 1e3,
             "mean_ms": us / 1e3 / count if count else None,
             "share": us / total_us if total_us > 0 else None}
            for name, (count, us) in by_name.items()]
    return sorted(rows, key=lambda r: (-r["total_ms"], r["name"]))


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

    mode, calls = ("cuda" if cuda else "cpu"), m["profile_calls"]
    start = time.perf_counter()
    try:
        for _ in range(WARMUP_CALLS):
            call()
        sync()
        with torch.profiler.profile(activities=_activities(cuda)) as prof:
            for _ in range(calls):
                call()
            sync()
        events = prof.key_averages()
    except Exception as exc:
        if raised_in_own_code(exc):
            raise
        return kernels_section(source=SOURCE, mode=mode, calls=calls, rows=[],
                               seconds=time.perf_counter() - start,
                               error=f"{type(exc).__name__}: {str(exc)[:300]}")
    return kernels_section(source=SOURCE, mode=mode, calls=calls,
                           rows=op_rows(events, cuda=cuda), seconds=time.perf_counter() - start)
