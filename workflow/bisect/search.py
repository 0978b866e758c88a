"""The bisection over revisions (pure): revisions grouped by their content key, then
paired A/B steps between group representatives, walked over the commit graph as
`git bisect` walks it.

A revision whose case inputs (model sources, flags, tools, settings) equal one of its
parents' cannot be what changed the case: it joins that parent's group, and only a
group's first revision (the one that brought its inputs) is measured. Over a line
(releases, or commits without merges) that is the run of equal keys; over merges it
is the parent's key, so a merge that took one side's files unchanged is never measured.

The walk is git bisect's, over the groups' first revisions: the candidates are those
that could be the first bad one (ancestors of every bad, of no good); each step
measures the candidate whose ancestors among the candidates are closest to half of
them, so a regression on a merged side branch is found on that branch, where binary
search over the rev-list's line would step past it and name the merge. Every step
compares against the good end, never two absolute timings, so drift between steps
cannot walk the bisection the wrong way; a step the protocol cannot decide is measured
once more with a larger budget, and where it still cannot, the bisection stops and says
which range is left rather than guess. A revision that cannot be measured (its suite
does not load, its model does not build) is skipped as `git bisect skip` skips: a
neighbour is measured instead, and only when the skipped ones are all that is left is
the answer the range that holds them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from workflow.backends.output import machine_fault
from workflow.regression.gate import PASSED, REGRESSED, UNJUDGED
from workflow.stats.enums import ABVerdict
from workflow.stats.ratio_text import ratio_text

# The larger budget an inconclusive step is measured again with: twice the rounds and
# seconds (bisect.measure scales the suite's `ab` settings by it).
RETRY_SCALE = 2
# The candidates a summary names when the answer is a range (the JSON has them all).
NAMED = 5


@dataclass(frozen=True)
class Revision:
    """A revision (a commit's sha or a release's version) and its case's content key.
    `parents`: the revisions it was made from (None: the one before it in the list, as
    releases and a line of commits are); parents outside the list are not in the range
    and do not count. `broken`: why it cannot be measured (its suite does not load or
    lacks the case, its model cannot be imported), known before anything is measured."""
    name: str
    key: str
    parents: tuple[str, ...] | None = None
    broken: str | None = None


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


def parents_of(revisions: list[Revision]) -> dict[str, tuple[str, ...]]:
    """Each revision's parents within the list (the one before it where none are given)."""
    names = {r.name for r in revisions}
    out = {}
    for i, rev in enumerate(revisions):
        given = rev.parents if rev.parents is not None else \
            ((revisions[i - 1].name,) if i else ())
        out[rev.name] = tuple(p for p in given if p in names)
    return out


def groups(revisions: list[Revision]) -> list[list[Revision]]:
    """The revisions by the group whose inputs they have, each group's first revision
    first, in order: a revision with the key of one of its parents (listed before it)
    joins that parent's group. Over a line, the runs of consecutive equal keys."""
    parents, group_of = parents_of(revisions), {}
    out: dict[str, list[Revision]] = {}
    keys = {r.name: r.key for r in revisions}
    for rev in revisions:
        same = next((p for p in parents[rev.name] if p in group_of and keys[p] == rev.key),
                    None)
        group_of[rev.name] = group_of[same] if same else rev.name
        out.setdefault(group_of[rev.name], []).append(rev)
    return list(out.values())


def skipped(grouped: list[list[Revision]]) -> list[dict]:
    """Every revision that is not its group's first, with why it is not measured."""
    return [{"revision": r.name, "kind": "skipped", "verdict": None, "same_as": g[0].name,
             "why": f"same inputs as {g[0].name}"} for g in grouped for r in g[1:]]


def _entry(kind: str, step: Step, retried: bool) -> dict:
    return {"kind": kind, "revision": step.new, "against": step.base,
            "verdict": step.verdict, "ratio": step.ratio, "ci": step.ci,
            "rounds": step.rounds, "retried": retried,
            **({"fault": fault_of(step)} if fault_of(step) else {})}


def fault_of(step: Step) -> str | None:
    """The machine's fault that failed a step (a write it refused: `could not write PATH:
    No space left on device`), or None."""
    return step.row.get("fault") if step.verdict == ABVerdict.FAILED else None


def _fault_summary(step: Step, what: str) -> str:
    # A refused write is freed by the user; a build the cache lost is made again.
    fix = ("free the space or make the file system writable, and rerun: the builds made "
           "are reused" if machine_fault(fault_of(step) or "") else "rerun")
    return (f"stopped by a fault of this machine, not of {step.new}: {fault_of(step)}; "
            f"{what} (not retried: a longer budget would meet it again; {fix})")


def _decided(measure: Measure, base: str, new: str, kind: str,
             steps: list[dict]) -> Step:
    """A step, measured once more at RETRY_SCALE when the first is inconclusive (or
    failed: a tool that failed once may not again, and a second failure is final). A
    step the machine failed (fault_of: a full disk) is not: it is no noise."""
    final = kind == "final"
    step = measure(base, new, 1, final)
    if step.verdict in (ABVerdict.INCONCLUSIVE, ABVerdict.FAILED) and not fault_of(step):
        steps.append(_entry(kind, step, False))
        step = measure(base, new, RETRY_SCALE, final)
        steps.append(_entry(kind, step, True))
    else:
        steps.append(_entry(kind, step, False))
    return step


@dataclass
class _Graph:
    """The groups' first revisions ("reps") as a graph: each one's parents are the reps
    of its revision's parents, and `anc` its ancestors among the reps (itself included)
    as a bit mask over `reps`' positions, so a candidate's share is one popcount."""
    reps: list[str]
    rep: dict[str, str]                 # each revision's group's first revision
    parents: dict[str, tuple[str, ...]]
    anc: dict[str, int]
    broken: dict[str, str | None]

    def names(self, mask: int) -> list[str]:
        return [r for i, r in enumerate(self.reps) if mask >> i & 1]


def _graph(revisions: list[Revision], grouped: list[list[Revision]]) -> _Graph:
    rep = {r.name: g[0].name for g in grouped for r in g}
    parents = parents_of(revisions)
    reps = [g[0].name for g in grouped]
    graph = _Graph(reps, rep, {}, {}, {g[0].name: g[0].broken for g in grouped})
    for i, name in enumerate(reps):  # parents first: the list is in that order
        graph.parents[name] = tuple(dict.fromkeys(rep[p] for p in parents[name]))
        graph.anc[name] = 1 << i
        for p in graph.parents[name]:
            graph.anc[name] |= graph.anc.get(p, 0)
    return graph


def _choose(graph: _Graph, left: int, bad: str, untestable: set[str]) -> str | None:
    """git bisect's choice: the candidate (not the known bad one, nor one that cannot be
    measured) whose ancestors among the candidates are closest to half of them; on a
    tie the one with fewer (as binary search over a line takes the lower midpoint),
    then the earlier. None: no candidate is left to measure."""
    size, best = left.bit_count(), None
    for i, name in enumerate(graph.reps):
        if not left >> i & 1 or name == bad or name in untestable:
            continue
        below = (graph.anc[name] & left).bit_count()
        score = (abs(2 * below - size), below, i)
        if best is None or score < best[0]:
            best = (score, name)
    return best[1] if best else None


def _skip(steps: list[dict], name: str, why: str) -> None:
    steps.append({"kind": "skipped", "revision": name, "verdict": None, "same_as": None,
                  "why": f"{why}; skipped, a neighbour measured instead"})


def _walk(graph: _Graph, measure: Measure, ends: Step, steps: list[dict]) -> dict:
    """The search from the ends' pair on: {"bad": the first bad candidate left,
    "left": the candidates still open (a mask), "against_good": the steps of the bad
    ones against the good end, "stopped": the step that stayed undecided, or None}."""
    good, bad = graph.reps[0], ends.new
    left, untestable = graph.anc[bad] & ~graph.anc[good], set()
    against_good = {bad: ends}
    while (pick := _choose(graph, left, bad, untestable)) is not None:
        if graph.broken[pick]:
            untestable.add(pick)
            _skip(steps, pick, graph.broken[pick])
            continue
        step = _decided(measure, good, pick, "step", steps)
        if step.verdict == ABVerdict.REGRESSION:
            bad, against_good[pick] = pick, step
            left &= graph.anc[pick]
        elif step.verdict in (ABVerdict.NO_DIFFERENCE, ABVerdict.IMPROVEMENT):
            left &= ~graph.anc[pick]
        elif fault_of(step):  # the machine's, not the revision's: nothing to skip
            return {"bad": bad, "left": left, "against_good": against_good, "stopped": step}
        elif step.verdict == ABVerdict.FAILED:  # the good end built: this revision did not
            untestable.add(pick)
            _skip(steps, pick, f"could not be measured ({step.row.get('error') or 'failed'})")
        else:
            return {"bad": bad, "left": left, "against_good": against_good, "stopped": step}
    return {"bad": bad, "left": left, "against_good": against_good, "stopped": None}


def _last_good(graph: _Graph, left: int) -> str:
    """The good side of the candidates left: the first parent of the earliest one (of a
    line, the revision just before them)."""
    first = graph.names(left)[0]
    return (graph.parents[first] or (graph.reps[0],))[0]


def _listed(names: list[str]) -> str:
    more = f" and {len(names) - NAMED} more" if len(names) > NAMED else ""
    return ", ".join(names[:NAMED]) + more


def bisect(revisions: list[Revision], measure: Measure, final_rounds: int = 0) -> dict:
    """The first bad revision between revisions[0] (good) and revisions[-1] (bad), the
    revisions listed parents first.

    Returns {"outcome": a gate outcome, "summary": one line, "first_bad", "last_good",
    "final": the Step of first_bad against last_good (None without one), "steps": each
    measured (or skipped) step in order and then the revisions skipped by content,
    "measured": how many pairs were measured, "range": [good, bad] still open when the
    search stopped, "candidates": the revisions that may still be the first bad one}.
    REGRESSED: a first bad revision was found; PASSED: the ends do not differ (or the
    bad end is faster); UNJUDGED: a step stayed inconclusive, the ends could not be
    measured, or only revisions that cannot be measured are left.
    The final pair is measured on its own (measure's `final`) unless the last good
    revision is the good end and that step already took `final_rounds` rounds."""
    grouped = groups(revisions)
    graph = _graph(revisions, grouped)
    good, bad = graph.reps[0], graph.rep[revisions[-1].name]
    steps: list[dict] = []
    result = {"first_bad": None, "last_good": None, "final": None, "steps": steps,
              "groups": len(grouped), "range": [good, bad], "candidates": []}

    def done(outcome: str, summary: str) -> dict:
        steps.extend(skipped(grouped))
        measured = sum(1 for s in steps if s["kind"] != "skipped")
        return {**result, "outcome": outcome, "summary": summary, "measured": measured}

    if bad == good:
        return done(PASSED, f"no bad revision: every revision from {good} to "
                            f"{revisions[-1].name} has the same inputs for the case")
    ends = _decided(measure, good, bad, "ends", steps)
    if ends.verdict in (ABVerdict.NO_DIFFERENCE, ABVerdict.IMPROVEMENT):
        what = "no difference" if ends.verdict == ABVerdict.NO_DIFFERENCE else "faster"
        return done(PASSED, f"no bad revision: {revisions[-1].name} is {what} against "
                            f"{good} (x{ratio_text(ends.ratio)})")
    if fault_of(ends):
        return done(UNJUDGED, _fault_summary(ends, "nothing bisected"))
    if ends.verdict != ABVerdict.REGRESSION:
        return done(UNJUDGED, f"could not judge the ends ({ends.verdict} after a longer "
                              "retry); nothing bisected")
    walked = _walk(graph, measure, ends, steps)
    left, bad = walked["left"], walked["bad"]
    lo, open_ = _last_good(graph, left), graph.names(left)
    result.update(range=[lo, bad], candidates=open_)
    if walked["stopped"] is not None and fault_of(walked["stopped"]):
        return done(UNJUDGED, _fault_summary(
            walked["stopped"], f"the first bad revision is after {lo} and at or before {bad}"))
    if walked["stopped"] is not None:
        return done(UNJUDGED, f"stopped: {walked['stopped'].new} stayed "
                              f"{walked['stopped'].verdict} after a longer retry; the first "
                              f"bad revision is after {lo} and at or before {bad}")
    if len(open_) > 1:
        return done(UNJUDGED, f"only revisions that could not be measured are left: the "
                              f"first bad revision is one of {_listed(open_)} (after {lo})")
    return done(REGRESSED, _answer(result, graph, walked, measure, final_rounds))


def _answer(result: dict, graph: _Graph, walked: dict, measure: Measure,
            final_rounds: int) -> str:
    """The first bad revision against its (first) parent, the pair measured as final
    unless its step against the good end is that pair, long enough already."""
    bad = walked["bad"]
    # Its first parent, or the first that can be measured (one that cannot, ruled out
    # as an ancestor of a good revision, would fail the final pair).
    parents = graph.parents[bad] or (graph.reps[0],)
    lo = next((p for p in parents if not graph.broken[p]), parents[0])
    result.update(first_bad=bad, last_good=lo, range=[lo, bad])
    reused = walked["against_good"].get(bad) if lo == graph.reps[0] else None
    final = reused if reused is not None and reused.rounds >= final_rounds \
        else _decided(measure, lo, bad, "final", result["steps"])
    result["final"] = final
    if fault_of(final):
        return (f"first bad revision: {bad}; its final pair against {lo} was stopped by a "
                f"fault of this machine: {fault_of(final)}")
    return (f"first bad revision: {bad} (x{ratio_text(final.ratio)} against {lo}, "
            f"{final.verdict})" if final.ratio is not None else
            f"first bad revision: {bad} (against {lo}: {final.verdict})")
