"""A bisection step: two revisions' modules, each built at its own revision
(bisect/prepare.py), paired by comparisons/ab_modules.pair_modules (the A/B protocol's
rounds and attribution) under the suite's `ab` settings scaled for the step.
"""

from __future__ import annotations

from workflow.bisect.search import Step
from workflow.comparisons.ab_modules import pair_modules
from workflow.stats.enums import ABVerdict

# The rounds before the final pair's first look (the pair the answer reports, first bad
# against last good). A step may stop at its first look (8 rounds at the defaults) once
# its verdict is decided, and there the median's interval is about the range of the
# rounds ([1.32, 3.01] for a x2 change on a loaded 2-core machine). The plan's own width
# target cannot be required instead: a look stops on a decided verdict before it asks
# for the width (stats/sequential.decide). At 32 rounds the interval is the 9th to the
# 24th of the sorted ratios: about +-6 % at a 10 % spread per round (simulated under
# the default plan), against +-14 % at 8; 64 would buy +-4 % for twice the time. The
# plan still stops there when the verdict is decided or the width reached, so its
# alpha spending holds (the first look is fixed before any round).
FINAL_ROUNDS = 32


def scaled(ab: dict, scale: int, final: bool = False) -> dict:
    """The suite's `ab` settings with `scale` times the rounds and seconds: what an
    inconclusive step is measured again with; `final`: the first look at FINAL_ROUNDS
    (at most max_rounds)."""
    out = {**ab, "max_rounds": ab["max_rounds"] * scale, "budget_s": ab["budget_s"] * scale}
    if final:
        out["min_rounds"] = max(ab["min_rounds"], min(FINAL_ROUNDS, out["max_rounds"]))
    return out


def measure_pair(names: tuple[str, str], sides: tuple[dict, dict], *, scale: int,
                 log: str, final: bool = False) -> Step:
    """The paired A/B of two built revisions (`sides`: prepare's answers, base first)
    with the base side's suite `ab` settings scaled by `scale` (`final`: at least
    FINAL_ROUNDS rounds). A side that failed to build, or a tool that failed in a round,
    is a failed step naming the revision."""
    ab = scaled(sides[0]["ab"], scale, final) if "ab" in sides[0] else None
    row = pair_modules(names, sides, ab, log=log, seed_extra=str(scale))
    if row["verdict"] != ABVerdict.FAILED:
        row["scale"] = scale
    return Step(base=names[0], new=names[1], verdict=row["verdict"], ratio=row.get("ratio"),
                ci=row.get("ci95") or row.get("ci"), rounds=row.get("rounds") or 0, row=row)
