"""Pure statistics over invocation medians (the invocation is the unit: DESIGN.md).

scipy is imported where it is used: importing scipy.stats takes about a second, which
the CLI commands that import this module for other reasons should not pay."""

from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=4096)
def _rank(n: int, confidence: float) -> tuple[int, float] | None:
    """The one order-statistic rule: the largest k whose order statistics
    (x_(k), x_(n-k+1)) hold the median with probability
    1 - 2 P(Binom(n, 1/2) <= k - 1) >= confidence, with that exact probability; None
    when no k does (even k = 1, the range, covers only 1 - 2^(1-n): n < 6 for 95 %).

    The coverage is exact for continuous distributions and a lower bound with ties
    (the interval is closed)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n < 2:
        return None
    from scipy.stats import binom

    ks = np.arange(1, n // 2 + 1)
    coverage = 1 - 2 * binom.cdf(ks - 1, n, 0.5)
    ok = np.flatnonzero(coverage >= confidence)
    if not ok.size:
        return None
    i = int(ok.max())
    return int(ks[i]), float(coverage[i])


def median_interval(xs: Sequence[float], confidence: float = 0.95
                    ) -> tuple[float, float, float] | None:
    """Distribution-free confidence interval of the median from order statistics:
    (lo, hi, level), the narrowest symmetric pair (x_(k), x_(n-k+1)) whose binomial
    coverage is at least `confidence`, and `level`, that exact coverage (>= confidence,
    e.g. 0.979 for n = 10 at 95 %). None when n is too small for any pair to reach
    `confidence` (n < 6 for 95 %; in general n < log2(2 / (1 - confidence))): no
    interval is labelled with a level it does not have.

    Valid for i.i.d. samples of any distribution (this is the sign test inverted, the
    same interval as scipy.stats.quantile_test(xs, p=0.5)'s symmetric one)."""
    n = len(xs)
    if n == 0:
        raise ValueError("interval of no samples")
    r = _rank(n, confidence)
    if r is None:
        return None
    k, level = r
    s = np.sort(np.asarray(xs, dtype=float))
    return float(s[k - 1]), float(s[n - k]), level


def median_ci(xs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """median_interval without its level, falling back to the full range [min, max]
    when no pair reaches `confidence`; that range covers less (1 - 2 / 2^n, e.g.
    93.8 % for n = 5): median_ci_level(n) tells the coverage actually reached.
    Prefer median_interval, which says so by returning None."""
    iv = median_interval(xs, confidence)
    if iv is None:
        return float(min(xs)), float(max(xs))
    return iv[0], iv[1]


def median_ci_level(n: int, confidence: float = 0.95) -> float:
    """The coverage probability of median_ci over n samples (continuous distributions):
    at least `confidence`, except below it for small n, where median_ci falls back to
    [min, max] (0.75 for n = 3, 0.875 for n = 4, 0.9375 for n = 5; 0 for n = 1)."""
    if n < 1:
        raise ValueError("interval of no samples")
    r = _rank(n, confidence)
    return r[1] if r else 1 - 2.0 ** (1 - n)


def is_noisy(invocation_medians_ms: Sequence[float], noisy_cv: float) -> bool:
    """The protocol's one noisy rule: a CV of invocation medians above noisy_cv."""
    return cv(invocation_medians_ms) > noisy_cv


def summarize(invocation_medians_ms: Sequence[float], noisy_cv: float) -> dict:
    """The `timing` statistics of a case record from its invocation medians.

    `ci95_ms` is median_interval's 95 % interval, None below 6 invocations (no pair of
    order statistics reaches 95 % there); `ci_level` its exact coverage."""
    xs = list(invocation_medians_ms)
    c = cv(xs)
    iv = median_interval(xs)  # None below 6 invocations: no 95 % interval exists
    return {
        "median_ms": median(xs),
        "min_ms": float(min(xs)),
        "p90_ms": percentile(xs, 90),
        "cv": c,
        "ci95_ms": [iv[0], iv[1]] if iv else None,
        "ci_level": iv[2] if iv else None,  # the exact coverage of ci95_ms (>= 0.95)
        "invocations": len(xs),
        "invocation_medians_ms": xs,
        "noisy": is_noisy(xs, noisy_cv),
    }
