"""A run's common drift against its goldens (docs/goldens.md, "A run that moved as a whole"): pure.

On a shared machine, runs of unchanged code minutes apart move as a whole: in
tests/perf/rerun_evidence.py's 8 reruns the torch cases of one run sat 0.85x to 1.20x of
their medians over the runs, all together, while what was left of each case after the
run's own level spread 2-3 % (IREE's 3.6 %). A golden from one run cannot hold that
level: judged case by case, the whole run read as "12 of 12 regressed". The run's
level is estimated from its own cases (the median of their log ratios to their goldens,
robust to fewer than half of them changing) and taken out before each case is judged;
how far the level itself moved is stated, and beyond the tolerance it is not judged:
one run cannot tell a slower machine from a change that slowed every case.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# Fewer cases give a level that one changed case moves: the median of five survives two.
MIN_CASES = 5
# A case is judged on its ratio to the run's level only when that ratio also stands out
# from the other cases' by this many robust standard deviations: what is left between
# runs after the level is taken out is noise of its own, which the invocations inside a
# run do not see (p about 0.001 one-sided for a normal spread).
OUTLIER_Z = 3.0
# 1.4826 x MAD is a normal spread's standard deviation (a consistent estimator).
MAD_SCALE = 1.4826


@dataclass(frozen=True)
class Drift:
    """How a group of cases of one run moved against their goldens, together."""

    group: str
    factor: float   # exp(median of log(median / golden median)) over the group's cases
    spread: float   # robust standard deviation of those log ratios around it
    cases: int      # how many cases estimated it

    def describe(self) -> str:
        return (f"the {self.cases} {self.group} cases of this run moved x{self.factor:.3f} "
                f"together against their goldens (median ratio; each case's own ratio "
                f"to it spreads {100 * (math.exp(self.spread) - 1):.1f} %)")

    def to_dict(self) -> dict:
        return {"group": self.group, "factor": self.factor, "spread": self.spread,
                "cases": self.cases}


def common_drift(group: str, ratios: Sequence[float]) -> Drift | None:
    """The common drift of a group of cases from their ratios to their goldens; None with
    fewer than MIN_CASES (too few to tell the level from one case's change)."""
    logs = [math.log(r) for r in ratios if r and r > 0 and math.isfinite(r)]
    if len(logs) < MIN_CASES:
        return None
    centre = statistics.median(logs)
    mad = statistics.median(abs(x - centre) for x in logs)
    return Drift(group, math.exp(centre), MAD_SCALE * mad, len(logs))


def beyond(factor: float, tolerance: float) -> bool:
    """Whether a level moved past the tolerance, either way."""
    return factor > tolerance or factor < 1 / tolerance


def stands_out(ratio: float, drift: Drift) -> bool:
    """Whether a case's ratio to its run's level stands out from the other cases'."""
    return abs(math.log(ratio)) > OUTLIER_Z * drift.spread
