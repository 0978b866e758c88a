"""Pure statistics over invocation medians (the invocation is the unit: DESIGN.md)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def percentile(xs: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    s = sorted(xs)
    if not s:
        raise ValueError("percentile of no samples")
    pos = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return float(s[lo] + (s[hi] - s[lo]) * (pos - lo))


def cv(xs: Sequence[float]) -> float:
    """Coefficient of variation (sample stdev / mean) as a fraction; 0 for fewer than 2 samples."""
    if len(xs) < 2:
        return 0.0
    mean = statistics.fmean(xs)
    return float(statistics.stdev(xs) / mean) if mean else 0.0


def median_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics.

    Picks the narrowest symmetric pair (x_(k), x_(n-k+1)) whose binomial coverage is at
    least `confidence`; with fewer than 6 samples no pair reaches 95 %, and the full
    range [min, max] is returned (coverage 1 - 2 / 2^n, e.g. 93.8 % for n = 5).
    """
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("interval of no samples")
    best = (s[0], s[-1])
    for k in range(1, n // 2 + 1):
        # P(x_(k) <= median <= x_(n-k+1)) = 1 - 2 * P(Binom(n, 1/2) <= k - 1)
        tail = sum(math.comb(n, i) for i in range(k)) / 2.0**n
        if 1 - 2 * tail >= confidence:
            best = (s[k - 1], s[n - k])
        else:
            break
    return float(best[0]), float(best[1])


def summarize(invocation_medians_ms: Sequence[float], noisy_cv: float) -> dict:
    """The `timing` statistics of a case record from its invocation medians."""
    xs = list(invocation_medians_ms)
    c = cv(xs)
    lo, hi = median_ci(xs)
    return {
        "median_ms": median(xs),
        "min_ms": float(min(xs)),
        "p90_ms": percentile(xs, 90),
        "cv": c,
        "ci95_ms": [lo, hi],
        "invocations": len(xs),
        "invocation_medians_ms": xs,
        "noisy": c > noisy_cv,
    }
