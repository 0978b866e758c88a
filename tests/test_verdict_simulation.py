"""The time verdict under noise, by fixed-seed simulation (workflow/stats/verdict.py).

12 invocation medians against a 12-invocation golden, as on the loaded 2-core machine of
issue 20, where a case made 1.5x slower passed the gate. Noise models: lognormal at CVs
of 5, 20 and 40 %, and a "loaded machine": 3 % lognormal noise where 30 % of the
invocations are hit by outside load and take 1.3 to 2.0x as long (bimodal). A case is
`noisy` when its CV exceeds 10 % (the default noisy_cv), as the run stage decides.

Measured with these seeds (200 trials each), the share of 1.5x slowdowns called
regression / inconclusive / pass:

| noise | this rule | the rule before issue 20 (*) |
|---|---|---|
| CV 5 % | 100 / 0 / 0 % | 100 / 0 / 0 % |
| CV 20 % | 96.5 / 3 / 0.5 % | 1.5 / 98 / 0.5 % |
| CV 40 % | 58.5 / 35.5 / 6 % | 0 / 75 / 25 % |
| loaded | 84 / 12.5 / 3.5 % | 2.5 / 89 / 8.5 % |

(*) noisy: inconclusive unless every new invocation is slower than tolerance x the
slowest golden one; beyond the tolerance but not significant: pass.

Identical code (A/A): regressions 0, 1, 2 and 0 % (before: 0 %); inconclusive 0, 27, 51.5
and 25.5 % (before: 0, 8, 8, 3 %): at CV 20 % and more, 12 invocations cannot tell a
1.1x change from noise, and the gate now says so instead of passing.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from workflow.stats.summary import cv
from workflow.stats.verdict import GoldenRef, time_verdict

TRIALS = 200
N = 12
ALPHA = 0.05
NOISY_CV = 0.10


def lognormal(c: float):
    sigma = math.sqrt(math.log1p(c * c))
    return lambda rng, n: np.exp(rng.normal(0.0, sigma, n))


def loaded(rng, n):
    hit = rng.random(n) < 0.3
    return np.exp(rng.normal(0.0, 0.03, n)) * np.where(hit, rng.uniform(1.3, 2.0, n), 1.0)


MODELS = {"cv5": lognormal(0.05), "cv20": lognormal(0.20), "cv40": lognormal(0.40),
          "loaded": loaded}


def verdict(new, golden) -> str:
    ref = GoldenRef(source="simulated", median_ms=statistics.median(golden),
                    invocation_medians_ms=tuple(golden))
    return time_verdict(list(new), cv(list(new)) > NOISY_CV, ref, 1.10, ALPHA).verdict


def rates(model: str, ratio: float, seed: int = 1) -> dict[str, float]:
    draw, rng = MODELS[model], np.random.default_rng(seed)
    counts: dict[str, int] = {}
    for _ in range(TRIALS):
        golden = draw(rng, N)
        v = verdict(ratio * draw(rng, N), golden)
        counts[v] = counts.get(v, 0) + 1
    return {k: v / TRIALS for k, v in counts.items()}


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.slow
def test_identical_code_regresses_no_more_often_than_alpha(model):
    r = rates(model, 1.0)
    assert r.get("regression", 0) <= ALPHA and r.get("improvement", 0) <= ALPHA, r


# The least share of 1.5x slowdowns called `regression` per noise model (measured with
# these seeds: 100, 96.5, 58.5 and 84 %); whatever is not, is mostly inconclusive.
CAUGHT = {"cv5": 1.0, "cv20": 0.95, "cv40": 0.5, "loaded": 0.75}


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.slow
def test_a_1_5x_slowdown_is_a_regression_or_at_least_not_a_pass(model):
    r = rates(model, 1.5)
    assert r.get("regression", 0) >= CAUGHT[model], r
    # A pass is left only where noise put the median ratio within the tolerance (a 1.5x
    # change seen as <= 1.1x): measured 0 to 6 % with these seeds (timing.mde_ratio
    # tells how large a change a pass at that noise may hide).
    assert r.get("pass", 0) <= 0.08, r


@pytest.mark.slow
def test_a_re_measurement_judged_alone_keeps_the_false_alarm_rate():
    """The gate's re-measure (workflow/gating/remeasure.py): a case inconclusive on its
    12 invocations is measured 12 more times and those are judged alone against the
    same golden. Two looks, but no more false regressions than alpha over both."""
    for model in ("cv20", "cv40", "loaded"):
        draw, rng = MODELS[model], np.random.default_rng(2)
        false = 0
        for _ in range(TRIALS):
            golden = draw(rng, N)
            v = verdict(draw(rng, N), golden)
            if v == "inconclusive":
                v = verdict(draw(rng, N), golden)
            false += v == "regression"
        assert false / TRIALS <= ALPHA, (model, false)
