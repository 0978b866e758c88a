import math

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
    assert quiet["ci95_ms"] == [0.99, 1.01]
