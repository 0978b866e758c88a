import math
from fractions import Fraction

import numpy as np
import pytest

from workflow.stats import summary as stats


def test_median_and_percentile_match_numpy_definitions():
    xs = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert stats.median(xs) == 3.0
    assert stats.percentile(xs, 90) == pytest.approx(4.6)
    assert stats.percentile(xs, 0) == 1.0
    assert stats.percentile(xs, 100) == 5.0


def test_cv_is_a_fraction_of_the_mean():
    assert stats.cv([10.0, 10.0, 10.0]) == 0.0
    assert stats.cv([9.0, 11.0]) == pytest.approx(math.sqrt(2) / 10)
    assert stats.cv([3.0]) == 0.0


def test_median_ci_uses_order_statistics():
    # n = 5 cannot reach 95 %: the whole range is the interval.
    assert stats.median_ci([3, 1, 2, 5, 4]) == (1, 5)
    # n = 10: P(Binom(10, .5) <= 1) = 11/1024, coverage 97.9 % for (x_(2), x_(9)).
    xs = list(range(1, 11))
    assert stats.median_ci(xs) == (2, 9)


def test_summarize_flags_noisy_above_threshold():
    quiet = stats.summarize([1.0, 1.01, 0.99], noisy_cv=0.1)
    loud = stats.summarize([1.0, 1.5, 0.7], noisy_cv=0.1)
    assert not quiet["noisy"] and loud["noisy"]
    assert quiet["invocations"] == 3
    # 3 invocations: no pair of order statistics reaches 95 %, so no interval is given.
    assert quiet["ci95_ms"] is None and quiet["ci_level"] is None


def _brute_force_median_interval(n: int, confidence: float = 0.95):
    """(k, coverage): the largest k with P(x_(k) <= median <= x_(n-k+1)) >= confidence,
    counted exactly as 1 - 2 * sum_{i<k} C(n, i) / 2^n; k = 1 (the range) when none is."""
    best = (1, Fraction(1) - 2 * Fraction(1, 2**n))
    for k in range(1, n // 2 + 1):
        coverage = 1 - 2 * Fraction(sum(math.comb(n, i) for i in range(k)), 2**n)
        if coverage >= Fraction(confidence).limit_denominator(1000):
            best = (k, coverage)
    return best


@pytest.mark.parametrize("n", range(3, 31))
def test_median_ci_and_its_level_match_a_brute_force_binomial_count(n):
    k, coverage = _brute_force_median_interval(n)
    xs = [float(v) for v in range(n, 0, -1)]  # x_(i) = i, given out of order
    assert stats.median_ci(xs) == (k, n - k + 1)
    assert stats.median_ci_level(n) == pytest.approx(float(coverage), abs=1e-12)
    # At least 95 % from n = 6 on; below it, the [min, max] fallback says so.
    assert (stats.median_ci_level(n) >= 0.95) == (n >= 6)
    if n < 6:
        assert stats.median_ci(xs) == (1, n) and coverage == 1 - Fraction(2, 2**n)


def test_median_interval_reports_its_exact_level_or_none():
    assert stats.median_interval([3.0, 1.0, 2.0, 5.0, 4.0]) is None  # 93.8 % < 95 %
    lo, hi, level = stats.median_interval(list(range(1, 11)))
    assert (lo, hi) == (2, 9) and level == pytest.approx(1 - 2 * 11 / 1024)
    assert stats.median_interval(range(1, 7)) == (1, 6, 1 - 2 / 64)
    with pytest.raises(ValueError):
        stats.median_interval([])


@pytest.mark.parametrize("n", [6, 7, 10, 25, 40])
def test_median_interval_is_scipys_quantile_test_interval(n):
    from scipy import stats as sps

    xs = np.random.default_rng(n).lognormal(size=n)
    ci = sps.quantile_test(xs, q=float(np.median(xs)), p=0.5).confidence_interval(0.95)
    lo, hi, level = stats.median_interval(xs)
    assert (lo, hi) == (ci.low, ci.high) and level == stats.median_ci_level(n)


@pytest.mark.parametrize("n", [6, 10, 25])
def test_median_interval_covers_a_skewed_median_at_the_level_it_reports(n):
    rng = np.random.default_rng(n)
    true = 1.0  # the median of lognormal(0, 1)
    hits = 0
    for _ in range(2000):
        lo, hi, level = stats.median_interval(rng.lognormal(0.0, 1.0, n))
        hits += lo <= true <= hi
    assert abs(hits / 2000 - level) <= 0.02


def test_summarize_gives_the_interval_and_its_level_from_6_invocations():
    t = stats.summarize([1.0, 1.02, 0.98, 1.01, 0.99, 1.03], noisy_cv=0.1)
    assert t["ci95_ms"] == [0.98, 1.03] and t["ci_level"] == pytest.approx(1 - 2 / 64)
    five = stats.summarize([1.0, 1.02, 0.98, 1.01, 0.99], noisy_cv=0.1)
    assert five["ci95_ms"] is None and five["ci_level"] is None
    assert set(t) >= {"median_ms", "min_ms", "p90_ms", "cv", "invocations",
                      "invocation_medians_ms", "noisy"}
