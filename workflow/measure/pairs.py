"""The interleaved A/B schedule (DESIGN.md, "A/B pairs"): rounds of one invocation (or
timed block) of each side, in a seeded random order per round, so that load and drift
hit both sides and cancel in the round's ratio new / base; stopped by the sequential
plan of rounds (measure/plans.ab_plan) without inflating the false-alarm rate.

A round in which either side was disturbed by outside load (measure/disturbance.py) is
retaken, at most `max_retakes` times in all and not once most rounds were disturbed
(a persistent load, protocol.worth_retaking): the ratio of two blocks cancels load only
when the load hit both alike, and a load that starts or stops between them does not."""

from __future__ import annotations

import hashlib
import math
import random
import time
from collections.abc import Callable

from workflow.measure.protocol import Observation, worth_retaking
from workflow.stats import paired, sequential


def seed_of(*parts: str) -> int:
    """A pair's seed of its order of rounds: reproducible from its names."""
    return int.from_bytes(hashlib.sha256("/".join(parts).encode()).digest()[:4], "big")


def interleave(base: Callable[[], Observation], new: Callable[[], Observation],
               plan: sequential.Plan, *, budget_s: float, seed: int, max_retakes: int,
               power: float = 0.8) -> dict:
    """Rounds of (base, new) until the plan stops or budget_s is spent (from the first
    look on); returns the paired result with the per-round times and orders."""
    rng = random.Random(seed)
    base_ms: list[float] = []
    new_ms: list[float] = []
    orders: list[str] = []
    retaken: list[list[float]] = []
    disturbed_kept = 0
    t0 = time.monotonic()
    while True:
        first_new = rng.random() < 0.5
        if first_new:
            n = new()
            b = base()
        else:
            b = base()
            n = new()
        disturbed = b.disturbed or n.disturbed
        rounds_seen = len(retaken) + len(base_ms)
        if disturbed and worth_retaking(len(retaken) + disturbed_kept, rounds_seen,
                                        len(retaken), max_retakes):
            retaken.append([b.value_ms, n.value_ms])
            continue
        disturbed_kept += disturbed
        orders.append("B" if first_new else "A")
        base_ms.append(b.value_ms)
        new_ms.append(n.value_ms)
        d = paired.log_ratios(base_ms, new_ms)
        decision = sequential.decide(d, plan, sequential.PAIRED)
        if (not decision.stop and time.monotonic() - t0 >= budget_s
                and len(d) >= plan.first_look):
            decision = sequential.decide(d, plan, sequential.PAIRED, final_reason="time-budget")
        if decision.stop:
            break
    result = sequential.paired_result(d, plan, decision, power).to_dict()
    if not math.isfinite(result["mde"]):
        result["mde"] = None  # too few rounds to detect any slowdown with that power
    # ci95 only where the interval has that coverage (the plan's alpha may differ).
    result["ci95"] = result["ci"] if (result["level"] or 0) >= 0.95 else None
    seconds = time.monotonic() - t0
    # An inconclusive row says what would decide it at the noise it saw: the rounds and
    # seconds (retaken rounds' time included in a round's cost), and the settings to raise.
    decide = (sequential.to_decide(d, plan, seconds_per_round=seconds / len(d),
                                   budget_s=budget_s, power=power)
              if result["verdict"] == paired.INCONCLUSIVE else None)
    return {**result, "seconds": seconds, "base_ms": base_ms,
            "new_ms": new_ms, "orders": "".join(orders), "retaken": retaken,
            "plan": plan.to_dict(), "to_decide": decide}
