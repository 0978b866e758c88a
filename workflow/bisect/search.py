"""The bisection over revisions (pure): revisions grouped by their content key, then
paired A/B steps between group representatives, each step's verdict deciding which
half holds the first bad group.

A revision whose case inputs (model sources, flags, tools, settings) equal the
revision's before it cannot be what changed the case: it forms one group with that
one, and only a group's first revision (the one that brought its inputs) is measured.
Every step compares the midpoint against the good end, never two absolute timings,
so drift between steps cannot walk the bisection the wrong way; a step the protocol
cannot decide is measured once more with a larger budget, and where it still cannot,
the bisection stops and says which range is left rather than guess.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from workflow.regression.gate import PASSED, REGRESSED, UNJUDGED
from workflow.stats.enums import ABVerdict

# The larger budget an inconclusive step is measured again with: twice the rounds and
# seconds (bisect.measure scales the suite's `ab` settings by it).
RETRY_SCALE = 2


@dataclass(frozen=True)
class Revision:
    """A revision (a commit's sha or a release's version) and its case's content key."""
    name: str
    key: str


@dataclass
class Step:
    """One measured pair: the verdict, ratio, interval and rounds of `new` against
    `base`; `row` is the A/B row as measured (its commands, rounds, attribution)."""
    base: str
    new: str
    verdict: str
    ratio: float | None = None
    ci: list | None = None
    rounds: int = 0
    row: dict = field(default_factory=dict)


# measure(base, new, scale, final) -> Step: a paired A/B of two revisions, `scale` times
# the suite's round and seconds budget; `final`: the pair the answer reports, measured
# to an interval worth reporting (bisect/measure.py), not only until its verdict.
Measure = Callable[[str, str, int, bool], Step]


def groups(revisions: list[Revision]) -> list[list[Revision]]:
    """Runs of consecutive revisions with one content key, in order."""
    out: list[list[Revision]] = []
    for rev in revisions:
        if out and out[-1][0].key == rev.key:
            out[-1].append(rev)
        else:
            out.append([rev])
    return out


def skipped(grouped: list[list[Revision]]) -> list[dict]:
    """Every revision that is not its group's first, with why it is not measured."""
    return [{"revision": r.name, "kind": "skipped", "verdict": None, "same_as": g[0].name,
             "why": f"same inputs as {g[0].name}"} for g in grouped for r in g[1:]]


def _entry(kind: str, step: Step, retried: bool) -> dict:
    return {"kind": kind, "revision": step.new, "against": step.base,
            "verdict": step.verdict, "ratio": step.ratio, "ci": step.ci,
            "rounds": step.rounds, "retried": retried}


def _decided(measure: Measure, base: str, new: str, kind: str,
             steps: list[dict]) -> Step:
    """A step, measured once more at RETRY_SCALE when the first is inconclusive (or
    failed: a tool that failed once may not again, and a second failure is final)."""
    final = kind == "final"
    step = measure(base, new, 1, final)
    if step.verdict in (ABVerdict.INCONCLUSIVE, ABVerdict.FAILED):
        steps.append(_entry(kind, step, False))
        step = measure(base, new, RETRY_SCALE, final)
        steps.append(_entry(kind, step, True))
    else:
        steps.append(_entry(kind, step, False))
    return step


def bisect(revisions: list[Revision], measure: Measure, final_rounds: int = 0) -> dict:
    """The first bad revision between revisions[0] (good) and revisions[-1] (bad).

    Returns {"outcome": a gate outcome, "summary": one line, "first_bad", "last_good",
    "final": the Step of first_bad against last_good (None without one), "steps": each
    measured step in order and then the skipped revisions, "measured": how many pairs
    were measured, "range": [good, bad] still open when the search stopped}.
    REGRESSED: a first bad revision was found; PASSED: the ends do not differ (or the
    bad end is faster); UNJUDGED: a step stayed inconclusive or failed.
    The final pair is measured on its own (measure's `final`) unless the last good
    revision is the good end and that step already took `final_rounds` rounds."""
    grouped = groups(revisions)
    reps = [g[0].name for g in grouped]
    steps: list[dict] = []
    result = {"first_bad": None, "last_good": None, "final": None, "steps": steps,
              "groups": len(grouped), "range": [reps[0], reps[-1]]}

    def done(outcome: str, summary: str) -> dict:
        steps.extend(skipped(grouped))
        measured = sum(1 for s in steps if s["kind"] != "skipped")
        return {**result, "outcome": outcome, "summary": summary, "measured": measured}

    if len(grouped) == 1:
        return done(PASSED, f"no bad revision: every revision from {reps[0]} to "
                            f"{revisions[-1].name} has the same inputs for the case")
    ends = _decided(measure, reps[0], reps[-1], "ends", steps)
    if ends.verdict in (ABVerdict.NO_DIFFERENCE, ABVerdict.IMPROVEMENT):
        what = "no difference" if ends.verdict == ABVerdict.NO_DIFFERENCE else "faster"
        return done(PASSED, f"no bad revision: {revisions[-1].name} is {what} against "
                            f"{reps[0]} (x{ends.ratio:.3f})")
    if ends.verdict != ABVerdict.REGRESSION:
        return done(UNJUDGED, f"could not judge the ends ({ends.verdict} after a longer "
                              "retry); nothing bisected")
    lo, hi = 0, len(grouped) - 1
    against_good = {hi: ends}
    while hi - lo > 1:
        mid = (lo + hi) // 2
        step = _decided(measure, reps[0], reps[mid], "step", steps)
        if step.verdict == ABVerdict.REGRESSION:
            hi, against_good[mid] = mid, step
        elif step.verdict in (ABVerdict.NO_DIFFERENCE, ABVerdict.IMPROVEMENT):
            lo = mid
        else:
            result["range"] = [reps[lo], reps[hi]]
            return done(UNJUDGED, f"stopped: {reps[mid]} stayed {step.verdict} after a "
                                  f"longer retry; the first bad revision is after "
                                  f"{reps[lo]} and at or before {reps[hi]}")
    result.update(first_bad=reps[hi], last_good=reps[lo], range=[reps[lo], reps[hi]])
    reused = against_good[hi] if lo == 0 else None
    final = reused if reused is not None and reused.rounds >= final_rounds \
        else _decided(measure, reps[lo], reps[hi], "final", steps)
    result["final"] = final
    return done(REGRESSED, f"first bad revision: {reps[hi]} (x{final.ratio:.3f} against "
                           f"{reps[lo]}, {final.verdict})" if final.ratio is not None else
                f"first bad revision: {reps[hi]} (against {reps[lo]}: {final.verdict})")
