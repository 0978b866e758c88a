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

import math
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


IDS_PER_STATEMENT = 500


def latency_statement(case_ids: list[str]) -> str:
    """The latency rows of these cases, one row each (unordered)."""
    listed = ", ".join(sql.quote(c) for c in sorted(set(case_ids)))
    return (f"SELECT {sql.CASE_ID} AS case_id, {sql.RUN_ID} AS run_id, timestamp, name, "
            f"{sql.CONFIG} AS config, metric.benchmark_values AS values, "
            f"{sql.UNCLEAN} AS unclean FROM {sql.TABLE} "
            f"WHERE {sql.CASE_ID} IN ({listed}) AND metric.name = {sql.quote(sql.LATENCY)} "
            f"SETTINGS {sql.SERIES_SETTINGS} FORMAT JSONEachRow")


def points(store, case_ids: list[str]) -> dict[str, list[dict]]:
    """{case id: its stored runs, oldest first}: each {run_id, timestamp, time, config,
    values, clean, bisect}. A run with two rows of one case (a v3 file may repeat one) is
    one point holding both rows' values; a run no series can use (query.unusable: a
    value that is not finite, a time that is no time) is left out, as show and detect
    leave it out."""
    if not case_ids:
        return {}
    unusable = query.unusable(store)
    merged: dict[tuple[str, str], dict] = {}
    ids = sorted(set(case_ids))
    # A few hundred ids a statement: a report's thousands would pass chdb's query size.
    rows = [row for start in range(0, len(ids), IDS_PER_STATEMENT)
            for row in store.rows(latency_statement(ids[start:start + IDS_PER_STATEMENT]))]
    for row in rows:
        if row["run_id"] in unusable:
            continue
        values = row["values"]
        if not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
            continue
        key = (row["case_id"], row["run_id"])
        point = merged.get(key)
        if point is None:
            stamp = int(row["timestamp"])
            merged[key] = {"run_id": row["run_id"], "timestamp": stamp,
                           "time": query.iso(stamp), "config": row["config"] or "",
                           "values": [float(v) for v in values],
                           "clean": not row["unclean"],
                           "bisect": row["name"] == query.BISECT_RUN}
        else:
            point["values"] += [float(v) for v in values]
            point["timestamp"] = max(point["timestamp"], int(row["timestamp"]))
            point["clean"] = point["clean"] and not row["unclean"]
    out: dict[str, list[dict]] = {}
    for (cid, _), point in merged.items():
        out.setdefault(cid, []).append(point)
    for pts in out.values():
        pts.sort(key=lambda p: (p["timestamp"], p["run_id"]))
    return out
