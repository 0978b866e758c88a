"""The machine's measured matmul peak, the 100% of every percent-of-peak figure.

Measured, not taken from a datasheet: a shared CI VM's usable peak is far below the
CPU's nominal one. It is a Snakemake job of its own (results/peak.json), run once per
results directory and holding the bench slot like a timing job, so it never runs beside
a measurement and every report of the run divides by the same number.

Method: square f32 matrix products with numpy (OpenBLAS) and, when importable, torch
(oneDNN/MKL), all cores, a few sizes; after a warm-up call each is timed at least
REPEATS times and for BUDGET_S seconds, and the best call counts. The peak is the
highest of them: the fastest GEMM this machine was seen to do, so a case's percentage
says how close it comes to that. On a loaded machine it is lower than on a quiet one,
as the cases' own timings are.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

SIZES = (512, 1024, 2048)
REPEATS = 5
BUDGET_S = 0.5  # per library and size


def _best_gflops(matmul, a, b, n: int, repeats: int, budget_s: float) -> float:
    """Best of at least `repeats` calls, more while `budget_s` lasts: on a shared machine
    more tries give more chances of a call that nothing else disturbed."""
    matmul(a, b)  # warm-up: thread pool start, page faults
    best = float("inf")
    calls, started = 0, time.perf_counter()
    while calls < repeats or time.perf_counter() - started < budget_s:
        start = time.perf_counter()
        matmul(a, b)
        best = min(best, time.perf_counter() - start)
        calls += 1
    return 2.0 * n**3 / best / 1e9


def _numpy(sizes, repeats, budget_s) -> dict[str, float]:
    import numpy as np

    rng = np.random.default_rng(0)
    out = {}
    for n in sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        out[str(n)] = _best_gflops(np.matmul, a, b, n, repeats, budget_s)
    return out


def _torch(sizes, repeats, budget_s) -> dict[str, float] | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(os.cpu_count() or 1)
    gen = torch.Generator().manual_seed(0)
    out = {}
    with torch.inference_mode():
        for n in sizes:
            a = torch.randn(n, n, generator=gen, dtype=torch.float32)
            b = torch.randn(n, n, generator=gen, dtype=torch.float32)
            out[str(n)] = _best_gflops(torch.mm, a, b, n, repeats, budget_s)
    return out


def measure(sizes=SIZES, repeats: int = REPEATS, budget_s: float = BUDGET_S) -> dict:
    """{gflops, dtype, method, by_library: {lib: {size: GFLOP/s}}, threads, measured_at}."""
    by_library = {"numpy": _numpy(sizes, repeats, budget_s)}
    torch_result = _torch(sizes, repeats, budget_s)
    if torch_result is not None:
        by_library["torch"] = torch_result
    lib, size, best = max(((lib, n, g) for lib, res in by_library.items()
                           for n, g in res.items()), key=lambda t: t[2])
    return {
        "gflops": best,
        "dtype": "f32",
        "method": f"best {lib} {size}x{size} f32 matmul call of >= {repeats} timed calls "
                  f"and {budget_s} s, all cores",
        "by_library": by_library,
        "threads": os.cpu_count(),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def quick() -> float:
    """A rough peak in GFLOP/s in well under a second (numpy only: torch's import alone
    takes seconds), for estimating a plan's time before anything ran here; the run's own
    peak job (measure) replaces it."""
    return max(_numpy((512,), 3, 0.1).values())
