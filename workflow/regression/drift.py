"""A report's cases judged with their run's common drift taken out (stats/drift.py).

Each case is first judged alone (its `golden` section); then, per group of cases that
share how a machine drifts (one device, one backend family: IREE's invocations and
torch's workers drifted apart in the rerun evidence), the run's level against the
goldens is the median of the group's ratios, and every case of the group is judged
again against that level. Only goldens measured by benchflow count: a benchmark file's
golden_time_ms comes from another machine and is a threshold, not a level.
"""

from __future__ import annotations

from collections.abc import Callable

from workflow.stats.drift import Drift, beyond, common_drift
from workflow.stats.enums import Status


def group_of(case: dict) -> str:
    backend = str(case.get("backend") or "")
    return f"{case.get('device') or 'cpu'} {'torch' if backend.startswith('torch') else backend}"


def ratio(case: dict) -> float | None:
    """The case's median over its golden's, where its time can be judged against a
    golden benchflow measured at the same configuration; None otherwise."""
    g, t = case.get("golden") or {}, case.get("timing") or {}
    file = (case.get("provenance") or {}).get("benchmark_file")
    if (case.get("status") != Status.OK or not t.get("median_ms") or not g.get("value_ms")
            or g.get("config_differs") or not g.get("source") or g.get("source") == file):
        return None
    return t["median_ms"] / g["value_ms"]


def drifts(cases: list[dict]) -> dict[str, Drift]:
    """Each group's drift, from all its cases that can be judged. Disturbed ones count
    too: the median outlasts a few that outside load slowed, and under a hog every torch
    case of a run was disturbed, while the run's level still moved (x0.86 to x1.2)."""
    ratios: dict[str, list[float]] = {}
    for case in cases:
        r = ratio(case)
        if r is not None:
            ratios.setdefault(group_of(case), []).append(r)
    return {g: d for g, rs in ratios.items() if (d := common_drift(g, rs)) is not None}


def rejudged(cases: list[dict], judge: Callable[[dict, Drift], dict]) -> list[dict]:
    """`cases` with each case of a group that has a drift judged again by
    judge(case, drift) -> its `golden` section; the other cases as they are."""
    found = drifts(cases)
    return [{**c, "golden": judge(c, found[group_of(c)])}
            if group_of(c) in found and ratio(c) is not None else c for c in cases]


def of_section(golden: dict | None) -> Drift | None:
    """The drift a `golden` section was judged with (to judge the case again with it)."""
    d = (golden or {}).get("drift")
    return Drift(**d) if d else None


def level_moved(golden: dict | None) -> bool:
    """Whether a `golden` section was judged against a level past its tolerance."""
    d, tolerance = (golden or {}).get("drift"), (golden or {}).get("tolerance")
    return bool(d and tolerance) and beyond(d["factor"], tolerance)
