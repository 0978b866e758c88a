"""Speedups between cases of a report (pure): computed once at aggregation, where
every case is at hand, so each baseline is measured once and reused by every case
that compares with it.

Each speedup says what it is (`speedup.basis`, $defs/speedup_basis of the report
schema). A *cross-run* speedup is the ratio of two medians measured at different
moments: drift and outside load between the two batches are in it (issue 22: after one
torch batch was measured again, inductor became 0.0081× eager with identical code), so
it names both cases and when each was measured. A *paired* speedup comes from an A/B
row (results/ab.json) that measured the two sides interleaved, round by round, and
carries the row's interval: `fill_paired` puts it in the same slot.
"""

from __future__ import annotations

from workflow.stats.enums import ABVerdict, Status

# The kinds of speedup.basis, the schema's `kind` constants.
CROSS_RUN, PAIRED = "cross-run", "paired"
KEYS = ("vs_baseline", "vs_eager")
BASELINE = "baseline"
EAGER = "torch-eager"

Key = tuple[str, str, str, str]  # (sku, backend, workload, recipe): a case's siblings


def _median(case: dict) -> float | None:
    t = case.get("timing")
    return t["median_ms"] if case.get("status") == Status.OK and t else None


def _key(case: dict) -> Key:
    return case["sku"], case["backend"], case["workload"], case["recipe"]


def base_key(case: dict, which: str, eager_backend: str = EAGER) -> Key | None:
    """The case that `which` (vs_baseline, vs_eager) compares `case` with: the baseline
    recipe on the same SKU, backend and workload, or torch-eager with the same recipe;
    None where the case is that one itself."""
    sku, backend, workload, recipe = _key(case)
    if which == "vs_baseline":
        return None if recipe == BASELINE else (sku, backend, workload, BASELINE)
    return None if backend == eager_backend else (sku, eager_backend, workload, recipe)


def measured_at(case: dict) -> str | None:
    """When a case was measured: its timing.measured_at (the first kept timed invocation),
    else its provenance.started_at (an IREE case: when its first stage began, seconds
    before its run), else None."""
    return ((case.get("timing") or {}).get("measured_at")
            or (case.get("provenance") or {}).get("started_at"))


def cross_run(base: dict, case: dict) -> dict:
    """The basis of a ratio of the two cases' medians."""
    return {"kind": CROSS_RUN, "base_ms": _median(base), "case_ms": _median(case),
            "base_id": base["id"], "base_measured_at": measured_at(base),
            "case_measured_at": measured_at(case)}


def _blank(case: dict) -> tuple[dict, dict]:
    """The case's speedup section and its basis, every key present (null when unset)."""
    speed = case.setdefault("speedup", {})
    for which in KEYS:
        speed.setdefault(which, None)
    basis = speed.get("basis") or {}
    speed["basis"] = basis
    for which in KEYS:
        basis.setdefault(which, None)
    return speed, basis


def fill_speedups(cases: list[dict], eager_backend: str = EAGER) -> None:
    """Sets speedup.vs_baseline (baseline recipe, same SKU, backend, workload) and
    speedup.vs_eager (torch-eager, same SKU, workload, recipe) on every timed case, each
    with its cross-run basis. Ratios are baseline time / case time: above 1 the case is
    faster."""
    by_key = {_key(c): c for c in cases}
    for c in cases:
        speed, basis = _blank(c)
        if not _median(c):
            continue
        for which in KEYS:
            base = by_key.get(base_key(c, which, eager_backend))
            if base and _median(base):
                speed[which] = _median(base) / _median(c)
                basis[which] = cross_run(base, c)


def ab_sides(row: dict) -> tuple[Key, Key] | None:
    """The (sku, backend, workload, recipe) of an A/B row's base and new side, from its
    `sides` (a torch pair: ab.schema.json's torch_side each); None for a row without them
    (an IREE pair of two SKUs' modules)."""
    sides = row.get("sides")
    if not sides:
        return None
    base, new = sides["base"], sides["new"]
    return ((base["sku"], base["backend"], base["workload"], base["recipe"]),
            (new["sku"], new["backend"], new["workload"], new["recipe"]))


def row_name(row: dict) -> str:
    """An A/B row as results/ab.json and `benchflow ab` name it: its sides and workload."""
    return f"{row['base']} -> {row['new']} on {row['workload']}"


def paired(row: dict, base_id: str | None) -> dict:
    """The basis of a speedup measured by A/B row `row`: the row's ratio is new / base
    (above 1: the case is slower), so the speedup is its inverse, and so is the
    interval, its ends swapped."""
    ci = row.get("ci95")
    return {"kind": PAIRED, "ratio": 1.0 / row["ratio"],
            "ci95": [1.0 / ci[1], 1.0 / ci[0]] if ci else None,
            "level": row.get("level"), "ab_row": row_name(row), "base_id": base_id,
            "rounds": row.get("rounds"), "verdict": row.get("verdict")}


def fill_paired(cases: list[dict], rows: list[dict], eager_backend: str = EAGER) -> int:
    """Replaces speedups by paired ones where an A/B row (results/ab.json's pairs, in
    order) measured exactly the two sides of one: same SKU and workload, the base side
    the baseline recipe (vs_baseline) or torch-eager (vs_eager), the new side the case.
    A failed row measured nothing and is passed over. Returns how many were filled."""
    by_key = {_key(c): c for c in cases}
    by_sides = {}
    for i, row in enumerate(rows):
        sides = ab_sides(row)
        if sides and row.get("verdict") != ABVerdict.FAILED and row.get("ratio"):
            by_sides[sides] = i
    filled = 0
    for c in cases:
        speed, basis = _blank(c)
        for which in KEYS:
            base = base_key(c, which, eager_backend)
            i = by_sides.get((base, _key(c))) if base else None
            if i is None:
                continue
            basis[which] = paired(rows[i], by_key[base]["id"] if base in by_key else None)
            speed[which] = basis[which]["ratio"]
            filled += 1
    return filled
