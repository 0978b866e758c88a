import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from workflow.stats import paired
from workflow.stats.summary import median_interval
from workflow.stats.verdict import GoldenRef, time_verdict


def _rounds(rng, n, ratio, noise=0.02):
    """n paired rounds: base and new each with lognormal noise `noise`."""
    base = 10.0 * rng.lognormal(0.0, noise, n)
    new = 10.0 * ratio * rng.lognormal(0.0, noise, n)
    return base, new


def test_a_clear_slowdown_is_a_regression_with_the_ratio_inside_its_interval():
    base, new = _rounds(np.random.default_rng(1), 12, 1.2)
    r = paired.compare(base, new)
    assert r.verdict == paired.REGRESSION
    lo, hi = r.ci
    assert lo <= r.ratio <= hi and lo <= 1.2 <= hi and lo > 1
    assert r.level >= 0.95 and r.rounds == 12 and r.p_value < 0.05
    assert 1 < r.mde < 1.2
    assert json.loads(json.dumps(r.to_dict()))["ci"] == [lo, hi]


def test_a_clear_speedup_is_an_improvement():
    base, new = _rounds(np.random.default_rng(2), 12, 1 / 1.2)
    assert paired.compare(base, new).verdict == paired.IMPROVEMENT


def test_identical_distributions_are_never_a_regression():
    base, new = _rounds(np.random.default_rng(3), 40, 1.0)
    r = paired.compare(base, new)
    assert r.verdict in (paired.NO_DIFFERENCE, paired.INCONCLUSIVE)
    assert r.ci[0] <= 1 <= r.ci[1]
    # Over many experiments a false regression stays within alpha / 2 (one side).
    rng = np.random.default_rng(4)
    false = sum(paired.classify(*_ratio_and_ci(np.log(np.divide(*_rounds(rng, 10, 1.0)[::-1]))))
                == paired.REGRESSION for _ in range(2000))
    assert false / 2000 <= 0.025


def _ratio_and_ci(d, confidence=0.95):
    iv = paired.ratio_interval(d, confidence)
    return math.exp(float(np.median(d))), (None if iv is None else iv[:2])


def test_too_few_rounds_have_no_interval_and_no_verdict():
    r = paired.compare([1.0, 1.0, 1.0, 1.0, 1.0], [2.0, 2.1, 2.2, 2.0, 2.3])
    assert r.ci is None and r.level is None and r.verdict == paired.INCONCLUSIVE
    assert r.mde == math.inf


@pytest.mark.parametrize("d", [[0.1, 0.2, -0.05, 0.3, 0.15, 0.4, 0.02],
                               [-0.1, 0.2, -0.05, 0.3, -0.15, 0.4, -0.02, 0.01, 0.5]])
def test_the_p_value_is_scipys_exact_sign_test(d):
    pos = sum(x > 0 for x in d)
    assert paired.sign_test_p(d) == pytest.approx(sps.binomtest(pos, len(d), 0.5).pvalue,
                                                  rel=1e-12)


def test_ties_at_zero_count_against_rejection():
    # Four slower rounds and four timer ties: no evidence of the sign of the ties.
    assert paired.sign_test_p([0.1, 0.1, 0.1, 0.1, 0, 0, 0, 0]) == 1.0


def test_the_p_value_and_the_interval_always_agree():
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(6, 40))
        d = rng.normal(rng.normal(0, 0.3), 1, n)
        lo, hi, level = median_interval(d, 0.95)
        excludes = lo > 0 or hi < 0
        assert excludes == (paired.sign_test_p(d) <= 1 - level + 1e-12)


def test_the_interval_contains_the_true_ratio():
    base, new = _rounds(np.random.default_rng(6), 25, 1.07, noise=0.05)
    lo, hi = paired.compare(base, new).ci
    assert lo <= 1.07 <= hi


@pytest.mark.parametrize("n", [6, 10, 25])
def test_the_ratio_interval_covers_at_the_level_it_reports(n):
    rng = np.random.default_rng(100 + n)
    true, hits, levels = 1.05, 0, set()
    for _ in range(2000):
        lo, hi, level = paired.ratio_interval(np.log(np.divide(*_rounds(rng, n, true,
                                                                      0.1)[::-1])))
        hits += lo <= true <= hi
        levels.add(level)
    (level,) = levels
    assert abs(hits / 2000 - level) <= 0.02


@pytest.mark.parametrize("ratio, ci, verdict", [
    (1.05, (1.02, 1.08), paired.REGRESSION),
    (1.005, (1.001, 1.009), paired.NO_DIFFERENCE),   # real but below the margin
    (1.008, (1.002, 1.015), paired.INCONCLUSIVE),    # real, size unknown
    # Issue 22's A/A under load: an interval that clears 1 but not the margin.
    (1.015, (1.003, 1.219), paired.INCONCLUSIVE),
    (1.03, (1.008, 1.05), paired.INCONCLUSIVE),
    (0.97, (0.95, 0.992), paired.INCONCLUSIVE),
    (0.95, (0.92, 0.98), paired.IMPROVEMENT),
    (1.0, (0.995, 1.005), paired.NO_DIFFERENCE),
    (1.0, (0.95, 1.05), paired.INCONCLUSIVE),
    (1.0, None, paired.INCONCLUSIVE),
])
def test_classify_uses_the_interval_and_the_margin(ratio, ci, verdict):
    assert paired.classify(ratio, ci, margin=0.01) == verdict


def test_mde_shrinks_with_rounds_and_grows_with_noise():
    by_n = [paired.mde_paired_n(n, 0.03) for n in (6, 10, 20, 40, 80, 160)]
    assert all(a > b for a, b in zip(by_n, by_n[1:], strict=False))
    by_sigma = [paired.mde_paired_n(20, s) for s in (0.005, 0.01, 0.03, 0.1)]
    assert all(a < b for a, b in zip(by_sigma, by_sigma[1:], strict=False))
    # The whole interval must clear the margin: the MDE is the margin plus what the
    # noise needs, and tends to the margin as the noise vanishes.
    assert 1.01 < by_sigma[0] < 1.02
    assert 1.01 < paired.mde_paired_n(20, 1e-4) < 1.0105
    assert paired.mde_paired_n(5, 0.03) == math.inf


def test_mde_tends_to_the_normal_approximation_with_the_median_efficiency():
    n, s = 400, 0.03
    approx = math.exp((1.959964 + 0.841621) * math.sqrt(math.pi / 2) * s / math.sqrt(n))
    got = paired.mde_paired_n(n, s, margin=0.0)
    assert math.log(got) == pytest.approx(math.log(approx), rel=0.05)


def test_mde_paired_estimates_sigma_from_the_rounds():
    d = np.random.default_rng(8).normal(0.2, 0.03, 400)
    assert paired.mde_paired(d) == paired.mde_paired_n(400, paired.robust_sigma(d))
    assert paired.robust_sigma(d) == pytest.approx(0.03, rel=0.1)  # a shift does not move it
    d[:20] = 5.0                                                    # nor do a few outliers
    assert paired.robust_sigma(d) == pytest.approx(0.03, rel=0.15)


@pytest.mark.parametrize("n", [15, 20])
def test_at_the_mde_a_regression_is_detected_with_the_stated_power(n):
    sigma, power = 0.03, 0.8
    mde = paired.mde_paired_n(n, sigma, power=power)
    rng = np.random.default_rng(n)
    d = math.log(mde) + sigma * rng.standard_normal((4000, n))
    hits = sum(paired.classify(*_ratio_and_ci(row)) == paired.REGRESSION for row in d)
    assert abs(hits / 4000 - power) <= 0.03


def test_the_exact_mann_whitney_null_matches_scipy():
    rng = np.random.default_rng(9)
    for n1, n2 in [(3, 3), (5, 5), (4, 7), (10, 6)]:
        sf = paired._mwu_null_sf(n1, n2)
        for _ in range(5):
            a, b = rng.standard_normal(n1), rng.standard_normal(n2)
            res = sps.mannwhitneyu(a, b, alternative="greater", method="exact")
            assert sf[int(res.statistic)] == pytest.approx(res.pvalue, abs=1e-12)


def test_mde_two_sample_is_monotone_and_infinite_where_p_cannot_reach_alpha():
    assert paired.mde_two_sample(0.05, 3, 3) == math.inf  # smallest p is 1/20
    by_n = [paired.mde_two_sample(0.1, n, n) for n in (4, 6, 10, 20)]
    assert all(a > b for a, b in zip(by_n, by_n[1:], strict=False))
    by_cv = [paired.mde_two_sample(cv, 5, 5) for cv in (0.01, 0.05, 0.1, 0.2)]
    assert all(a < b for a, b in zip(by_cv, by_cv[1:], strict=False))
    assert by_cv[0] == pytest.approx(1.10, abs=0.01)  # quiet: the tolerance binds


@pytest.mark.parametrize("cv, n_new, n_golden", [(0.1, 5, 5), (0.05, 8, 5)])
@pytest.mark.slow
def test_at_the_two_sample_mde_the_golden_verdict_fires_with_the_stated_power(
        cv, n_new, n_golden):
    power = 0.8
    mde = paired.mde_two_sample(cv, n_new, n_golden, alpha=0.05, power=power,
                                tolerance=1.10)
    rng = np.random.default_rng(10)
    sigma = math.sqrt(math.log1p(cv * cv))
    hits, draws = 0, 1500
    for _ in range(draws):
        gold = rng.lognormal(0, sigma, n_golden)
        new = mde * rng.lognormal(0, sigma, n_new)
        ref = GoldenRef("g", median_ms=float(np.median(gold)),
                        invocation_medians_ms=tuple(gold))
        hits += time_verdict(list(new), False, ref, 1.10, 0.05).verdict == "regression"
    assert abs(hits / draws - power) <= 0.035
