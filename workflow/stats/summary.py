"""Pure statistics over invocation medians (the invocation is the unit: DESIGN.md).

scipy is imported where it is used: importing scipy.stats takes about a second, which
the CLI commands that import this module for other reasons should not pay."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def percentile(xs: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    if not len(xs):
        raise ValueError("percentile of no samples")
    return float(np.percentile(xs, q))


def cv(xs: Sequence[float]) -> float:
    """Coefficient of variation (sample stdev / mean) as a fraction; 0 for fewer than 2 samples."""
    if len(xs) < 2 or not statistics.fmean(xs):
        return 0.0
    from scipy import stats

    return float(stats.variation(xs, ddof=1))


def _order_rank(n: int, confidence: float) -> int:
    """The largest k whose order statistics (x_(k), x_(n-k+1)) hold the median with
    probability 1 - 2 P(Binom(n, 1/2) <= k - 1) >= confidence; 1 (the full range) when
    none does."""
    from scipy.stats import binom

    ks = np.arange(1, n // 2 + 1)
    ok = ks[1 - 2 * binom.cdf(ks - 1, n, 0.5) >= confidence]
    return int(ok.max()) if ok.size else 1


def median_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics.

    Picks the narrowest symmetric pair (x_(k), x_(n-k+1)) whose binomial coverage is at
    least `confidence`; with fewer than 6 samples no pair reaches 95 %, and the full
    range [min, max] is returned all the same, whose coverage is lower (1 - 2 / 2^n,
    e.g. 93.8 % for n = 5): median_ci_level(n) tells the coverage actually reached.
    """
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("interval of no samples")
    k = _order_rank(n, confidence)
    return float(s[k - 1]), float(s[n - k])


def median_ci_level(n: int, confidence: float = 0.95) -> float:
    """The coverage probability of median_ci over n samples (continuous distributions):
    at least `confidence`, except below it for small n, where median_ci falls back to
    [min, max] (0.75 for n = 3, 0.875 for n = 4, 0.9375 for n = 5; 0 for n = 1)."""
    if n < 1:
        raise ValueError("interval of no samples")
    from scipy.stats import binom

    return float(1 - 2 * binom.cdf(_order_rank(n, confidence) - 1, n, 0.5))


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
