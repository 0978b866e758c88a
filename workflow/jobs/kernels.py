"""An IREE case's `kernels` (issue 25): the profiling invocation after its timed ones, and
a compile-only case's dispatch list from the compiler's statistics.

The profiling invocation runs in the run stage's job, after measure() returned: its
calls are in no invocation of the timing and in none of the protocol's time budget, and
the job holds the machine (bench_slot) as the timing did, so nothing else runs beside it.
On the local HAL it is timed by IREE's HAL profiling (iree-profile); on IREE's CUDA
driver, which has none, by NVIDIA's per-kernel timing (gpu_kernels.py: nsys), joined to
the dispatch functions. A profiling failure (the tool's error, a device without
host-execution profiling, no GPU timing tool, a timeout) is the section's `error`: the
case's timing stands and the case stays ok.
"""

from __future__ import annotations

import time

from workflow.backends.iree import gpu_kernels, profile
from workflow.errors import StageError
from workflow.records.kernels import kernels_section


def profiled_kernels(argv: list[str], m: dict, timeout: float, log: str,
                     dispatches: list[str] | None = None) -> dict | None:
    """The `kernels` of a measured case: `m["profile_calls"]` calls of the timing's
    iree-benchmark-module `argv` profiled with iree-profile, or on a CUDA device with
    the first GPU timing tool found (its kernels joined to `dispatches`, the dispatch
    functions the compile listed; by IREE's naming of them when not given); None when
    the SKU's measurement says `profile: false`."""
    if not m["profile"]:
        return None
    calls = m["profile_calls"]
    gpu = gpu_kernels.cuda_device(argv)
    # The section of a failure names the tool that was (or would have been) used.
    source, mode = (gpu_kernels.TOOLS[0], gpu_kernels.MODE) if gpu else \
        ("iree-profile", profile.MODE)
    start = time.monotonic()
    try:
        if gpu:
            out = gpu_kernels.profile_gpu_case(argv, timeout=timeout, log=log,
                                               iterations=calls, dispatches=dispatches)
        else:
            out = profile.profile_case(argv, timeout=timeout, log=log, iterations=calls)
    except StageError as exc:
        return kernels_section(source=source, mode=mode, calls=calls, rows=[],
                               seconds=time.monotonic() - start, error=exc.message)
    # call_ms: the profiling invocation's own time per call (the benchmark's, read from
    # iree-profile's run or from nsys's output), which its rows must fit in
    # (records/kernels.implausible).
    return kernels_section(source=out["tool"], mode=out["mode"], calls=out["iterations"],
                           rows=out["dispatches"], seconds=out["seconds"],
                           call_ms=out.get("call_ms"))


def compiled_kernels(statistics: dict, m: dict) -> dict | None:
    """The `kernels` a compile gives (profile.compile_statistics' `dispatches`): each
    dispatch function a call runs, with its count per call and no time; a case only
    compiled (its device absent here) keeps them. None with `profile: false`."""
    if not m["profile"]:
        return None
    rows = [{"name": d["name"], "count": d["count"], "total_ms": None, "share": None}
            for d in statistics["dispatches"]]
    return kernels_section(source="iree-compile", mode="compile-only", calls=None, rows=rows,
                           seconds=None)
