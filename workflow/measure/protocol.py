"""The one invocation loop of the protocol (DESIGN.md, "Measurement protocol").

A runner makes one invocation of some members (the cases of a torch batch, or the one
IREE case): `run(ids) -> {id: Observation | error string}`. Everything else is decided
here, the same for every runner:

- how many invocations: a fixed count, with a noisy member measured again with as many
  more (noisy data alone may not decide), or adaptive, judged only at the looks of the
  group-sequential plan (measure/plans.invocation_plan) until the median's interval is
  narrow enough, the last look, or the first invocation after budget_s;
- disturbed invocations (measure/disturbance.py): one that ran while other processes
  took more than `disturbed_share` of the CPUs is retaken, at most `max_retakes` times
  per member, not after budget_s, and not once most invocations so far were disturbed
  (a persistent load: `worth_retaking`); what is kept disturbed marks the member
  `disturbed`, with the reason, in every report;
- a member whose invocation failed stops there with its error.

Members still measuring are invoked together, so a batch's cases interleave in time
and a slow drift of the machine spreads over all of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from workflow.measure.disturbance import METHOD as DISTURBANCE_METHOD
from workflow.measure.plans import invocation_plan
from workflow.stats import sequential
from workflow.stats import summary as stats


@dataclass
class Observation:
    """One invocation of one member."""

    value_ms: float                  # the invocation's figure
    data: Any = None                 # the runner's full result
    disturbance: dict | None = None  # measure.disturbance.Probe.result()
    seconds: float | None = None     # its wall time, where the runner timed it alone

    @property
    def disturbed(self) -> bool:
        return bool(self.disturbance and self.disturbance.get("disturbed"))


@dataclass
class Measured:
    """What the loop kept of one member and how its count was decided."""

    kept: list[Observation] = field(default_factory=list)
    retaken: list[Observation] = field(default_factory=list)
    error: str | None = None
    sampling: dict = field(default_factory=dict)   # the timing fields of the decision
    target: int = 0                                # fixed counts: invocations to reach
    started_at: str | None = None                  # UTC, when its invocations began

    @property
    def values(self) -> list[float]:
        return [o.value_ms for o in self.kept]

    def disturbance(self, threshold: float) -> dict | None:
        """The timing's `disturbance` section; None when no invocation was observed."""
        seen = [o.disturbance for o in self.kept if o.disturbance]
        if not seen:
            return None
        bad = [d for d in seen if d.get("disturbed")]
        reason = None
        if bad:
            worst = max(d["outside_share"] or 0 for d in bad)
            reason = (f"{len(bad)} of {len(self.kept)} invocations ran while other processes "
                      f"used up to {worst:.0%} of the CPUs (threshold {threshold:.0%}); "
                      f"{len(self.retaken)} retaken")
        return {"disturbed": bool(bad), "reason": reason, "retaken": len(self.retaken),
                "retaken_ms": [o.value_ms for o in self.retaken], "threshold": threshold,
                **{k: [d.get(k) for d in seen] for k in
                   ("outside_share", "steal_share", "nivcsw", "cpu_per_wall", "load1")},
                "method": DISTURBANCE_METHOD}


# Invocations seen before a load that disturbed most of them counts as persistent.
PERSISTENT_AFTER = 3

Runner = Callable[[list[str]], dict[str, "Observation | str"]]


def measure(run: Runner, ids: list[str], m: dict,
            targets: dict[str, dict] | None = None) -> dict[str, Measured]:
    """Invokes the members `ids` until each is decided (module doc); m is the SKU's
    `measurement` section, `targets` a member's own target width ({rel_width, source}:
    what it will be judged by, planning/targets.py). Each member spends its own budget_s:
    the seconds of its own invocations where the runner timed them alone
    (Observation.seconds), else of the rounds since the first. Returns id -> Measured,
    its `sampling` ready for the timing section (noisy_reruns, stop_reason, and for
    adaptive counts the plan's interval)."""
    fixed = m["max_invocations"] <= m["invocations"]
    own = {i: with_target_width(m, (targets or {}).get(i)) for i in ids}
    plans = {i: None if fixed else invocation_plan(own[i]) for i in ids}
    now = datetime.now(UTC).isoformat(timespec="seconds")
    out = {i: Measured(target=m["invocations"], started_at=now) for i in ids}
    spent = dict.fromkeys(ids, 0.0)
    active, t0 = list(ids), time.monotonic()
    while active:
        results = run(active)
        rounds = time.monotonic() - t0
        for i in active:
            timed = getattr(results[i], "seconds", None)
            spent[i] = spent[i] + timed if timed is not None else rounds
            _take(out[i], results[i], m, retake=spent[i] < m["budget_s"])
        active = [i for i in active if out[i].error is None
                  and not _decided(out[i], own[i], plans[i], spent[i])]
    return out


def with_target_width(m: dict, target: dict | None) -> dict:
    """A measurement section with a member's own target width ({rel_width, source})."""
    if not target:
        return m
    return {**m, "target_rel_width": target["rel_width"], "target_source": target["source"]}


def worth_retaking(disturbed: int, seen: int, retaken: int, max_retakes: int) -> bool:
    """Whether to retake a disturbed invocation, given how many of the `seen` ones
    before it were disturbed and how many were retaken: while retakes are left and the
    load looks passing. Once at least PERSISTENT_AFTER were seen and most of them were
    disturbed, the load is the machine's state, a retake would meet it again, and the
    time is better spent on invocations that count (under a 2-core hog every retake of
    the A/A evidence was disturbed too, issue 22)."""
    persistent = seen >= PERSISTENT_AFTER and 2 * disturbed > seen
    return retaken < max_retakes and not persistent


def _take(member: Measured, result: Observation | str, m: dict, retake: bool) -> None:
    """Keeps an invocation, or sets it aside to be retaken (disturbed, and retakes and
    seconds are left, and the load looks passing), or records the member's failure."""
    seen = [*member.kept, *member.retaken]
    if isinstance(result, str):
        member.error = result
    elif result.disturbed and retake and worth_retaking(
            sum(o.disturbed for o in seen), len(seen), len(member.retaken), m["max_retakes"]):
        member.retaken.append(result)
    else:
        member.kept.append(result)


def _decided(member: Measured, m: dict, plan: sequential.Plan | None, spent: float) -> bool:
    """Whether a member needs no more invocations; sets its `sampling` when it doesn't."""
    xs = member.values
    if plan is None:
        if len(xs) < member.target:
            return False
        if (member.target == m["invocations"] and m["rerun_noisy"]
                and stats.is_noisy(xs, m["noisy_cv"])):
            member.target += m["invocations"]  # twice in all, then decide
            return False
        member.sampling = {"noisy_reruns": int(member.target > m["invocations"]),
                           "stop_reason": "fixed"}
        return True
    if not xs:
        return False
    decision = sequential.decide(xs, plan)
    if not decision.stop and len(xs) >= plan.first_look and spent >= m["budget_s"]:
        decision = sequential.decide(xs, plan, final_reason="time-budget")
    if not decision.stop:
        return False
    interval = [decision.lo, decision.hi] if decision.lo is not None else None
    member.sampling = {
        "noisy_reruns": 0, "stop_reason": decision.reason,
        "ci95_ms": interval if (decision.level or 0) >= 0.95 else None,
        "ci_level": decision.level if interval else None,
        "target_rel_width": plan.target_rel_width, "rel_width": decision.rel_width,
        # What set the target: the SKU's, or a golden's tolerance (planning/targets.py).
        "target_source": m.get("target_source", "measurement.target_rel_width"),
        "sequential": {"looks": list(plan.looks), "alpha": plan.alpha,
                       "target_rel_width": plan.target_rel_width,
                       "budget_s": m["budget_s"], "method": sequential.METHOD}}
    return True


def measure_one(invoke: Callable[[], Observation], m: dict) -> Measured:
    """measure() of a single member whose runner raises on failure (an IREE case: its
    StageError names the stage)."""
    return measure(lambda ids: {ids[0]: invoke()}, ["case"], m)["case"]


def timing_section(member: Measured, m: dict) -> dict:
    """The timing fields every runner shares: the summary of the kept invocations, how
    their count was decided, and what disturbed them."""
    disturbance = member.disturbance(m["disturbed_share"])
    return {**stats.summarize(member.values, m["noisy_cv"]), **member.sampling,
            "disturbed": bool(disturbance and disturbance["disturbed"]),
            "disturbance": disturbance, "measured_at": member.started_at}
