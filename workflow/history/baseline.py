"""Read-only queries of the store for `benchflow check --against-history N` (issue 43):
the stored latency points of a report's cases with their measurement configuration, and
which stored runs hold one of the report's own measurements (regression/rolling.py
chooses the baseline from them).

A point is one run of one case: its invocation medians (`metric.benchmark_values` of
the `latency median (ms)` row: render/dashboard.metrics), its measured time (the row's
timestamp), its measurement configuration (sql.CONFIG: records/measurement_config.as_text;
'' for a row stored before it was recorded), whether the protocol found it disturbed, and
whether it is a bisection step (query.BISECT_RUN).
Nothing here writes: the statements are SELECTs, sent to a store opened to read (an
embedded one reads a snapshot)."""

from __future__ import annotations

from pathlib import Path

from workflow.history import query, sql
from workflow.history.ingest import measurement_id


def report_measurements(report_path: str | Path
                        ) -> tuple[dict[str, int], dict[int, set[str]], int]:
    """({case id: when it was measured, unix seconds}, {timestamp: measurement ids}, the
    report's own time) of a
    report's rows as an ingest of it makes them (history/importers: dashboard.records with
    each case's measured time; ingest.measurement_id), so that a run that stored any of
    them is known. A case without rows (failed, skipped) has no time of its own: it
    takes the report's."""
    from workflow.history.importers import read_runs

    stamps: dict[str, int] = {}
    ids: dict[int, set[str]] = {}
    run_time = 0
    for run in read_runs(Path(report_path)):
        run_time = max(run_time, run.timestamp)
        for row in run.rows:
            cid = row["benchmark"]["extra_info"].get("case_id", "")
            stamp = int(row.get("timestamp", run.timestamp))
            stamps[cid] = stamp
            ids.setdefault(stamp, set()).add(measurement_id(cid, stamp, row["metric"]))
    return stamps, ids, run_time


def runs_holding(store, measurements: dict[int, set[str]]) -> set[str]:
    """The ids of the stored runs that hold any of these measurements ({timestamp: ids}):
    looked up by their timestamps, the table's primary key, as ingest looks them up."""
    if not measurements:
        return set()
    stamps = ", ".join(str(int(t)) for t in sorted(measurements))
    wanted = sorted({m for ms in measurements.values() for m in ms})
    listed = ", ".join(sql.quote(m) for m in wanted)
    rows = store.rows(f"SELECT DISTINCT {sql.RUN_ID} AS run_id FROM {sql.TABLE} "
                      f"WHERE timestamp IN ({stamps}) AND {sql.MEASUREMENT_ID} IN ({listed}) "
                      "SETTINGS optimize_functions_to_subcolumns = 0 FORMAT JSONEachRow")
    return {r["run_id"] for r in rows}


def points(store, case_ids: list[str]) -> dict[str, list[dict]]:
    """{case id: its stored latency runs, oldest first}, read as `history show` and
    `detect` read them (query.series: one point a run, its invocation values, `clean`,
    `bisect`; a run no series can use left out), each point with its series'
    measurement configuration (`config`: '' not recorded)."""
    wanted = set(case_ids)
    if not wanted:
        return {}
    # One case: its id as the pattern (the by_series projection reads it alone).
    pattern = next(iter(wanted)) if len(wanted) == 1 else "*"
    out: dict[str, list[dict]] = {}
    for s in query.series(store, pattern, sql.LATENCY):
        if s["case_id"] in wanted:
            out.setdefault(s["case_id"], []).extend({**p, "config": s["config"]}
                                                    for p in s["points"])
    for pts in out.values():
        pts.sort(key=lambda p: (p["timestamp"], p["run_id"]))
    return out
