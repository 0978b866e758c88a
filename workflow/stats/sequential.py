"""Optional stopping without inflating the error rate (pure, no I/O).

Measurement goes on round by round and may stop as soon as the data allow: the
interval is narrow enough, or the paired verdict is decided. Looking at a plain 95 %
interval after every round and stopping on the first exciting one makes false alarms
far likelier than 5 % (tests/test_stats_sequential.py shows it). The plan here is a
group-sequential design with Bonferroni alpha spending:

- the data are only judged at a fixed geometric schedule of looks n_1, g n_1,
  g^2 n_1, ... below max_rounds, and at max_rounds (growth g = 2 by default);
- the error alpha is split evenly over the K looks, alpha_j = alpha / K, and look j
  uses the order-statistic interval of the median at level >= 1 - alpha_j;
- by the union bound, all K intervals hold at once with probability
  >= 1 - sum_j (1 - L_j) >= 1 - alpha (L_j: the exact coverage of look j's interval),
  so whichever look the data stop at, its interval holds with that probability, and
  a false "regression" (lo > 1 while the true ratio is <= 1) has probability
  <= sum_j (1 - L_j) / 2 <= alpha / 2 whatever the stopping rule.

Method: alpha spending (Lan, K. K. G. and DeMets, D. L., "Discrete sequential
boundaries for clinical trials", Biometrika 70(3), 1983) with the Bonferroni
(union-bound) spend alpha / K per look, applied to the distribution-free
order-statistic confidence interval of the median (the sign test inverted). Bonferroni
ignores the correlation between looks, so it is conservative; in exchange it needs no
assumption on the distribution of the rounds beyond i.i.d. (A confidence sequence for
quantiles, Howard, S. R. and Ramdas, A., "Sequential estimation of quantiles with
applications to A/B-testing and best-arm identification", Bernoulli 28(3), 2022,
would allow a look after every round, at the price of wider intervals.)

The first look: at level 1 - alpha_1 even the range [min, max] of n rounds covers only
1 - 2^(1-n), so a look needs n >= ceil(log2(2 / alpha_1)) rounds (8 for alpha = 0.05
over 4 looks). The plan raises its first look to that (and recomputes the schedule
until it is consistent), so every look has an interval at its level.

A stop for a reason outside the data (the caller's seconds budget: decide(...,
final_reason="time-budget")) spends at that round all the alpha the looks before it
have not spent. That is valid when the moment of that stop does not depend on the
measured values; a time budget depends on them only weakly (slower rounds use it up
sooner). The level reported for it is the bound over the looks before it and itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from workflow.stats import paired
from workflow.stats.summary import _rank, median_interval

MEDIAN, PAIRED = "median", "paired"
CONTINUE, NOT_A_LOOK = "continue", "not-a-look"
WIDTH_REACHED, DECIDED, MAX_ROUNDS = "width-reached", "decided", "max-rounds"
OUT_OF_REACH = "width-out-of-reach"
METHOD = ("group-sequential looks (geometric schedule) with Bonferroni alpha spending "
          "(Lan & DeMets 1983) on order-statistic intervals of the median")


def min_rounds_for(alpha_look: float) -> int:
    """The fewest rounds whose range [min, max] covers the median at 1 - alpha_look:
    the smallest n with 2^(1-n) <= alpha_look, i.e. ceil(log2(2 / alpha_look))."""
    n = max(2, math.ceil(math.log2(2 / alpha_look)))
    while _rank(n, 1 - alpha_look) is None:  # guards float rounding of the log
        n += 1
    return n


def _schedule(first: int, max_rounds: int, growth: float) -> tuple[int, ...]:
    looks, n = [], float(first)
    while math.ceil(n) < max_rounds:
        if not looks or math.ceil(n) > looks[-1]:
            looks.append(math.ceil(n))
        n *= growth
    return (*looks, max_rounds)


class TooFewRounds(ValueError):
    """max_rounds below the fewest rounds whose first look has an interval at its level
    (alpha split over the schedule's looks): `needed`, so that a caller names its own
    key (max_invocations, ab.max_rounds) and the value to set."""

    def __init__(self, max_rounds: int, needed: int, alpha: float):
        self.max_rounds, self.needed, self.alpha = max_rounds, needed, alpha
        super().__init__(f"{max_rounds} rounds are too few for a {100 * (1 - alpha):g} % "
                         f"interval (alpha {alpha:g} split over the looks of the schedule); "
                         f"at least {needed} are needed")


@dataclass(frozen=True)
class Plan:
    """A fixed schedule of looks and the alpha each spends (module doc).

    min_rounds is raised when the first look could not have an interval at its level
    (`first_look` says where it ended up); max_rounds is always the last look."""

    min_rounds: int = 6
    max_rounds: int = 48
    alpha: float = 0.05
    target_rel_width: float = 0.02   # stop when (hi - lo) / estimate <= this
    margin: float = 0.01             # paired: the practical margin of the verdict
    growth: float = 2.0
    # kind median: stop at a look once the target width is out of reach, i.e. the
    # interval projected to max_rounds (its width shrinks about as 1 / sqrt(n)) would
    # still be more than `out_of_reach` x the target. None: never (A/B pairs, whose
    # stop is their verdict).
    out_of_reach: float | None = None
    looks: tuple[int, ...] = field(init=False)
    alpha_look: float = field(init=False)   # alpha_j: the same at every look

    def __post_init__(self):
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.growth <= 1:
            raise ValueError(f"growth must exceed 1, got {self.growth}")
        first = max(2, int(self.min_rounds))
        while True:
            if first > self.max_rounds:
                raise TooFewRounds(self.max_rounds, first, self.alpha)
            looks = _schedule(first, self.max_rounds, self.growth)
            need = min_rounds_for(self.alpha / len(looks))
            if first >= need:
                break
            first = need
        object.__setattr__(self, "looks", looks)
        object.__setattr__(self, "alpha_look", self.alpha / len(looks))

    @property
    def first_look(self) -> int:
        return self.looks[0]

    def is_look(self, n: int) -> bool:
        return n in self.looks

    def look_level(self, n: int) -> float:
        """The exact coverage of the interval at look n (>= 1 - alpha_look)."""
        return _rank(n, 1 - self.alpha_look)[1]

    @property
    def level(self) -> float:
        """The simultaneous coverage of all the looks' intervals: >= 1 - alpha."""
        return 1 - sum(1 - self.look_level(n) for n in self.looks)

    def final_alpha(self, n: int) -> float:
        """The alpha a stop at round n for an outside reason may spend: what the looks
        before n have not."""
        before = sum(1 for m in self.looks if m < n)
        return self.alpha - before * self.alpha_look

    def to_dict(self) -> dict:
        return {"method": METHOD, "looks": list(self.looks), "alpha": self.alpha,
                "alpha_look": self.alpha_look, "level": self.level,
                "target_rel_width": self.target_rel_width, "margin": self.margin,
                "min_rounds": self.min_rounds, "max_rounds": self.max_rounds}


@dataclass(frozen=True)
class Decision:
    stop: bool
    reason: str                      # continue | not-a-look | width-reached | decided |
    #                                  max-rounds | width-out-of-reach | the caller's
    #                                  final_reason
    n: int
    estimate: float | None = None    # median (kind median) or ratio (kind paired)
    lo: float | None = None
    hi: float | None = None
    level: float | None = None       # simultaneous coverage under the plan (>= 1 - alpha)
    look_level: float | None = None  # exact coverage of this interval on its own
    alpha_spent: float | None = None  # the alpha this interval was built with
    rel_width: float | None = None   # (hi - lo) / estimate
    verdict: str | None = None       # kind paired: paired.classify's verdict
    p_value: float | None = None     # kind paired: sign test at this look
    p_adjusted: float | None = None  # p x alpha / alpha_spent: compare with the plan alpha

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def decide(xs: Sequence[float], plan: Plan, kind: str = MEDIAN,
           final_reason: str | None = None) -> Decision:
    """What to do after len(xs) rounds. kind "median": xs are a case's samples (e.g.
    invocation medians), the estimate their median; kind "paired": xs are log ratios
    log(new / base), the estimate the ratio exp(median).

    Only at the plan's looks is anything judged (elsewhere: stop False, "not-a-look").
    At a look: stop with "decided" (paired verdict regression, improvement or
    no-difference), else "width-reached" when the interval's relative width is at most
    plan.target_rel_width, else "max-rounds" at the last look, else (kind median, with
    plan.out_of_reach) "width-out-of-reach" when even max_rounds would likely not reach
    the target, else "continue".
    final_reason (e.g. "time-budget"): the caller stops here regardless; the interval
    then spends the alpha left (Plan.final_alpha)."""
    if kind not in (MEDIAN, PAIRED):
        raise ValueError(f"kind must be {MEDIAN!r} or {PAIRED!r}, got {kind!r}")
    x = np.asarray(xs, dtype=float)
    n = int(x.size)
    final = final_reason is not None
    if not final and not plan.is_look(n):
        if n > plan.max_rounds:
            return Decision(True, MAX_ROUNDS, n)
        return Decision(False, NOT_A_LOOK, n)
    if final:
        a = plan.final_alpha(n)
        before = [m for m in plan.looks if m < n]
        spent_before = sum(1 - plan.look_level(m) for m in before)
    else:
        a = plan.alpha_look
    med = float(np.median(x))
    iv = median_interval(x, 1 - a) if n and a > 0 else None
    if iv is None:
        estimate = math.exp(med) if kind == PAIRED else med
        verdict = paired.INCONCLUSIVE if kind == PAIRED else None
        return Decision(final, final_reason or CONTINUE, n, estimate, alpha_spent=a,
                        verdict=verdict)
    lo, hi, look_level = iv
    level = 1 - spent_before - (1 - look_level) if final else plan.level
    verdict = p = p_adj = None
    if kind == PAIRED:
        estimate, lo, hi = math.exp(med), math.exp(lo), math.exp(hi)
        verdict = paired.classify(estimate, (lo, hi), plan.margin)
        p = paired.sign_test_p(x)
        p_adj = min(1.0, p * plan.alpha / a)
    else:
        estimate = med
    rel = (hi - lo) / abs(estimate) if estimate else math.inf
    reason = final_reason if final else _look_reason(plan, kind, n, rel, verdict)
    stop = reason != CONTINUE
    return Decision(stop, reason, n, estimate, lo, hi, level, look_level, a, rel, verdict,
                    p, p_adj)


def _look_reason(plan: Plan, kind: str, n: int, rel: float, verdict: str | None) -> str:
    """Why a look stops (decide's docstring), or CONTINUE."""
    if verdict in (paired.REGRESSION, paired.IMPROVEMENT, paired.NO_DIFFERENCE):
        return DECIDED
    if rel <= plan.target_rel_width:
        return WIDTH_REACHED
    if n >= plan.max_rounds:
        return MAX_ROUNDS
    if kind == MEDIAN and plan.out_of_reach is not None and (
            rel * math.sqrt(n / plan.max_rounds) > plan.out_of_reach * plan.target_rel_width):
        # A loaded machine: more rounds would buy a little less width at the whole
        # budget's price. The interval so far holds at its level all the same.
        return OUT_OF_REACH
    return CONTINUE


def paired_result(d: Sequence[float], plan: Plan, decision: Decision,
                  power: float = 0.8) -> paired.PairedResult:
    """The PairedResult of a sequential run that stopped with `decision` after the
    rounds d: the interval is the plan's (decision.lo, decision.hi) with its
    simultaneous level; the MDE is that of a fixed design of these rounds at the
    alpha the final interval spent."""
    x = np.asarray(d, dtype=float)
    a = decision.alpha_spent if decision.alpha_spent is not None else plan.alpha_look
    base = paired.analyze(x, 1 - a, plan.margin, power, decision.reason)
    ci = (decision.lo, decision.hi) if decision.lo is not None else None
    return replace(base, ci=ci, level=decision.level, look_level=decision.look_level,
                   verdict=decision.verdict or paired.classify(base.ratio, ci, plan.margin),
                   p_adjusted=decision.p_adjusted,
                   method=f"{paired.METHOD}; {METHOD}")


def decide_probability(n: int, delta: float, sigma: float, plan: Plan) -> float:
    """The probability that `plan` with its last look at n rounds decides there (paired
    verdict regression, improvement or no-difference) when the log ratios are i.i.d.
    N(delta, sigma^2). Exact for that model from binomial counts of the order
    statistics (as paired._detect_probability): lo = d_(k), hi = d_(n-k+1) with k the
    rank of the last look's level; no-difference uses the bound P(lo >= -c, hi <= c)
    >= 1 - P(lo < -c) - P(hi > c). Earlier looks are ignored (they only add chances)."""
    from scipy.stats import binom, norm

    last = replace(plan, max_rounds=n)
    k = _rank(n, 1 - last.alpha_look)[0]
    c = math.log1p(plan.margin)
    below_c, below_minus_c = norm.cdf((c - delta) / sigma), norm.cdf((-c - delta) / sigma)
    regression = binom.cdf(k - 1, n, below_c)           # fewer than k rounds at or below c
    improvement = binom.cdf(k - 1, n, 1 - below_minus_c)  # fewer than k at or above -c
    lo_out = binom.sf(k - 1, n, below_minus_c)          # at least k rounds below -c
    hi_out = binom.sf(k - 1, n, 1 - below_c)            # at least k above c
    return float(min(1.0, regression + improvement + max(0.0, 1 - lo_out - hi_out)))


def rounds_to_decide(d: Sequence[float], plan: Plan, power: float = 0.8,
                     max_n: int = 100_000) -> int | None:
    """The fewest rounds n (a plan like `plan` with max_rounds n) whose last look decides
    with probability >= power if the rounds go on as observed: log ratios N(median(d),
    sigma^2), sigma their robust spread (paired.robust_sigma; their standard deviation
    when more than half tie). None when even max_n rounds would not: the ratio sits
    within the noise of the margin, or the noise is too large for it."""
    x = np.asarray(d, dtype=float)
    delta = float(np.median(x))
    sigma = paired.robust_sigma(x) or float(np.std(x))
    if sigma <= 0:   # every round the same ratio: decided unless it is the margin itself
        return None if math.isclose(abs(delta), math.log1p(plan.margin)) else plan.first_look

    def decides(n: int) -> bool:
        return decide_probability(n, delta, sigma, plan) >= power

    before, n = None, plan.first_look
    while n <= max_n:
        if decides(n):
            lo, hi = before or n, n     # bisect for the fewest (nearly monotone in n)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if decides(mid) else (mid, hi)
            return hi
        before, n = n, max(n + 1, math.ceil(n * 1.25))
    return None


def _round_up(seconds: float) -> float:
    """Seconds rounded up to two significant digits, as a setting is written (137 -> 140)."""
    if seconds <= 0:
        return 0.0
    step = 10 ** (math.floor(math.log10(seconds)) - 1)
    return math.ceil(seconds / step) * step


def to_decide(d: Sequence[float], plan: Plan, *, seconds_per_round: float, budget_s: float,
              power: float = 0.8, limit_s: float = 1800) -> dict:
    """What would decide an inconclusive paired comparison at the observed noise: the
    rounds (rounds_to_decide) and their seconds at the observed seconds per round, and
    which settings to raise to get them (max_rounds to those rounds when above the
    plan's; budget_s to their seconds when above the budget; None: enough already, a
    rerun decides with that probability). `decidable` is False when no rounds up to
    100,000 or no more than limit_s seconds would decide: at this noise the machine
    cannot decide the margin in a sane time."""
    x = np.asarray(d, dtype=float)
    n = rounds_to_decide(x, plan, power)
    seconds = None if n is None else n * seconds_per_round
    decidable = seconds is not None and seconds <= limit_s
    return {"rounds": n, "seconds": seconds, "power": power, "limit_s": limit_s,
            "sigma": paired.robust_sigma(x) or float(np.std(x)),
            "decidable": decidable,
            "max_rounds": n if decidable and n > plan.max_rounds else None,
            "budget_s": (_round_up(seconds) if decidable and seconds > budget_s else None)}
