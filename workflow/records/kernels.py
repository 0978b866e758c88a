"""The case record's `kernels` (issue 25; report.schema.json, $defs.case.properties.kernels):
where a case's time goes, per IREE dispatch function (on CUDA, per kernel joined to the
dispatch functions), torch op, or torch CUDA kernel, built here from any profiler's rows
so that every backend's section has one shape.

Rows come largest first; a profile of a large model names hundreds of dispatches, of
which a reader and the attribution use the top few, so a record keeps TOP of them and
sums the rest into one "(N others)" row (the rows' times still sum to the total).
"""

from __future__ import annotations

import re

# The rows a record keeps before the "(N others)" row.
TOP = 24
_OTHERS = re.compile(r"\((\d+) others\)")


def others_name(count: int) -> str:
    """The name of the row that sums `count` rows past the kept ones."""
    return f"({count} others)"


def others_count(name: str) -> int | None:
    """How many rows a "(N others)" row sums; None for any other row's name."""
    found = _OTHERS.fullmatch(name)
    return int(found.group(1)) if found else None
# A row's fields in the schema (a profiler's others, e.g. iree-profile's min/max, dropped).
ROW_FIELDS = ("name", "count", "total_ms", "mean_ms", "share", "workgroup")
# Fields a row has only from the profilers that give them: a CUDA kernel's launching op
# (torch.profiler on CUDA). Absent, not null, elsewhere: records of the other profilers
# stay as they were.
OPTIONAL_FIELDS = ("op",)


def _sum(rows: list[dict], key: str):
    """The rows' sum of `key`; None when any of them has none (compile-only counts)."""
    values = [r.get(key) for r in rows]
    return None if any(v is None for v in values) else sum(values)


def capped_rows(rows: list[dict], top: int = TOP) -> list[dict]:
    """`rows` (largest first) with the schema's fields only: the first `top`, and past
    them one "(N others)" row with their summed count, time and share."""
    kept = [{**{k: r.get(k) for k in ROW_FIELDS},
             **{k: r[k] for k in OPTIONAL_FIELDS if k in r}} for r in rows[:top]]
    rest = rows[top:]
    if rest:
        kept.append({"name": others_name(len(rest)), "count": _sum(rest, "count"),
                     "total_ms": _sum(rest, "total_ms"), "mean_ms": None,
                     "share": _sum(rest, "share"), "workgroup": None})
    return kept


def kernels_section(*, source: str, mode: str | None, calls: int | None, rows: list[dict],
                    seconds: float | None, error: str | None = None, top: int = TOP,
                    call_ms: float | None = None) -> dict:
    """A record's `kernels`: the rows capped (capped_rows), and their total time (None
    when a row has none: a compile-only list, or no rows). `call_ms`: what each profiled
    call took by the clock, where the profiler's caller measured it; a profile whose rows
    cannot have fit in that time is kept but marked (`implausible`) in `error`."""
    total = _sum(rows, "total_ms") if rows else None
    error = error or implausible(total, calls, call_ms)
    return {"source": source, "mode": mode, "calls": calls, "total_ms": total,
            "seconds": seconds, "rows": capped_rows(rows, top), "error": error}


# How far the rows' time per call may exceed the time each profiled call took. On one
# queue (local-sync, a torch op's self time on the calling thread, CUDA kernels on one
# stream) the rows are parts of the call and sum to at most its time: a ratio of 1 at
# most. Above 1 a true profile needs dispatches that ran at once (local-task's concurrent
# regions, several CUDA streams); half again of the call in overlap is already more than
# benchflow's cases show. What lies beyond is a wrong profile (a unit read wrongly, a
# bundle of another run, another process's kernels), whose numbers attribution and the
# reports must not present as the case's.
PLAUSIBLE_RATIO = 1.5


def implausible(total_ms: float | None, calls: int | None, call_ms: float | None) -> str | None:
    """Why a profile's rows (`total_ms` over `calls` calls) cannot be the calls' time,
    each call having taken `call_ms` by the clock; None when they can, or when a figure
    is missing (nothing to hold them to)."""
    if not total_ms or not calls or not call_ms or call_ms <= 0:
        return None
    per_call = total_ms / calls
    ratio = per_call / call_ms
    if ratio <= PLAUSIBLE_RATIO:
        return None
    return (f"implausible profile: its rows sum to {per_call:.3g} ms per call, {ratio:.1f}x "
            f"the {call_ms:.3g} ms each profiled call took (at most {PLAUSIBLE_RATIO:g}x "
            f"expected); its rows are kept in the record but not shown or attributed")
