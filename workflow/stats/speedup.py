"""Speedups between cases of a report (pure): computed once at aggregation, where
every case is at hand, so each baseline is measured once and reused by every case
that compares with it."""

from __future__ import annotations

from workflow.stats.enums import Status


def _median(case: dict) -> float | None:
    t = case.get("timing")
    return t["median_ms"] if case.get("status") == Status.OK and t else None


def fill_speedups(cases: list[dict], eager_backend: str = "torch-eager") -> None:
    """Sets speedup.vs_baseline (baseline recipe, same SKU, backend, workload) and
    speedup.vs_eager (torch-eager, same SKU, workload, recipe) on every timed case.
    Ratios are baseline time / case time: above 1 the case is faster."""
    by_key = {(c["sku"], c["backend"], c["workload"], c["recipe"]): c for c in cases}
    for c in cases:
        own = _median(c)
        speed = c.setdefault("speedup", {})
        speed.setdefault("vs_baseline", None)
        speed.setdefault("vs_eager", None)
        if not own:
            continue
        if c["recipe"] != "baseline":
            base = by_key.get((c["sku"], c["backend"], c["workload"], "baseline"))
            if base and _median(base):
                speed["vs_baseline"] = _median(base) / own
        if c["backend"] != eager_backend:
            eager = by_key.get((c["sku"], eager_backend, c["workload"], c["recipe"]))
            if eager and _median(eager):
                speed["vs_eager"] = _median(eager) / own
