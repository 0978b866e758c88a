"""Reading the store: the series of a case (or a glob of cases) and metric, as detect
and the page take them (contract: one point per run, sorted by (timestamp, run_id),
invocation-level values and their median), and the list of runs `history show` prints
without a pattern."""

from __future__ import annotations

import math
import statistics
from datetime import UTC, datetime

from workflow.history import sql
from workflow.history.importers import values as limits
from workflow.records import measurement_config

# Which way is better, by unit: time, counts and sizes go down; rates, ratios and
# accuracy go up. A unit not named here (a v3 file's own) is judged by its metric name.
# The name of the runs `benchflow bisect` keeps (bisect/history.py): a past revision
# measured today. In a series they sit among the nightly runs by the time they were
# measured, so they are shown but never used to locate a change (history/detect.py).
BISECT_RUN = "benchflow bisect"
# The runs `benchflow ab --base --new --store` keeps: two revisions measured in pairs
# today, alike (bisect/suite_ab.py).
AB_RUN = "benchflow ab"
PAIRED_RUNS = (BISECT_RUN, AB_RUN)
LOWER_UNITS = frozenset({"ms", "s", "us", "ns", "count", "bytes", "MB", "GB", "KB",
                         "MiB", "GiB"})
HIGHER_UNITS = frozenset({"GFLOP/s", "TFLOP/s", "%", "x", "pcc", "tokens/s",
                          "samples/s", "GB/s"})
HIGHER_WORDS = ("speedup", "throughput", "accuracy", "tok/s", "tokens/s", "flops",
                "bandwidth", "/s")


def direction(metric: str, unit: str) -> str:
    if unit in LOWER_UNITS:
        return "lower"
    if unit in HIGHER_UNITS:
        return "higher"
    name = metric.lower()
    return "higher" if any(w in name for w in HIGHER_WORDS) else "lower"


def iso(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def versions(dependencies: dict) -> dict[str, str]:
    """{dependency: version} of a dependencies map, its tuples read back as objects or
    as arrays (output_format_json_named_tuples_as_objects, which a server may set)."""
    return {name: dep["version"] if isinstance(dep, dict) else dep[3]
            for name, dep in (dependencies or {}).items()}


def _points(row: dict, facts: dict[str, dict]) -> list[dict]:
    """One point a run, sorted by (timestamp, run id); a run with two rows for one
    series (a v3 file may repeat one) is one point holding both rows' values."""
    merged: dict[str, list] = {}
    stamps: dict[str, int] = {}
    unclean: set[str] = set()
    skip: set[str] = set()
    for run_id, stamp, values, bad in zip(row["run_ids"], row["timestamps"], row["values"],
                                          row["unclean"], strict=True):
        # A run stored before the importers checked values (a millisecond timestamp, a
        # value the Float32 column made infinite: JSON null) is left out of the series;
        # the commands name it once (unusable()).
        if run_id not in facts or not all(_finite(v) for v in values):
            skip.add(run_id)
            continue
        merged.setdefault(run_id, []).extend(map(float, values))
        stamps[run_id] = int(stamp)
        if bad:
            unclean.add(run_id)
    out = []
    for run_id in sorted(set(merged) - skip, key=lambda r: (stamps[r], r)):
        run, values, stamp = facts[run_id], merged[run_id], stamps[run_id]
        # A run's rows share its timestamp: its time is formatted once, in runs().
        out.append({"run_id": run_id, "timestamp": stamp,
                    "time": run["time"] if run["timestamp"] == stamp else iso(stamp),
                    "head_sha": run["head_sha"],
                    "head_branch": run["head_branch"], "repo": run["repo"],
                    "workflow_id": run["workflow_id"], "versions": run["versions"],
                    "host": run["host"], "values": values,
                    # Disturbed by outside load, as its run's protocol judged: used
                    # with its wider spread, unless an outlier (history/detect.py).
                    "clean": run_id not in unclean,
                    "bisect": run["name"] in PAIRED_RUNS,
                    "value": statistics.median(values) if values else float("nan")})
    return out


def _finite(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def unusable(store) -> dict[str, str]:
    """{run id: why} of the runs whose rows no series can use (sql.unusable_runs): a
    store written before the importers checked each value may hold them; they are left
    out of every series and list, and `benchflow history remove` removes them."""
    latest = limits.now() + limits.FUTURE_TOLERANCE_S
    out = {}
    for row in store.rows(sql.unusable_runs(latest)):
        stamp = int(row["latest"])
        why = limits.time_problem(stamp) if stamp > latest else None
        out[row["run_id"]] = f"its timestamp {why}" if why else \
            f"{row['nonfinite']} row(s) hold values that are not finite numbers"
    return out


def series(store, pattern: str = "*", metric: str | None = sql.LATENCY) -> list[dict]:
    """Every series whose case id `pattern` names (exactly or as an fnmatch glob) for
    `metric` (None: every metric), sorted by case id and metric, then by their first
    run. A series is one measurement configuration's runs (sql.series): `config` its
    text ('' not recorded). Where a case and metric have runs at several, each series'
    id names its configuration (`case :: metric [threads=2,...]`; `measurement_config.label`), and
    each after the first says where it began (`new_config`: its first run, and the
    configuration measured before it): a new configuration starts a new series, never a
    step in the old one. With one configuration the id is `case :: metric`, as before
    configurations were recorded."""
    sql.check_text(pattern, "CASE|GLOB")
    if metric is not None:
        sql.check_text(metric, "--metric")
    rows = store.rows(sql.series(pattern, metric))
    if not rows:
        return []
    facts = {run["run_id"]: run for run in runs(store)}
    out = [{"id": f"{row['case_id']} :: {row['metric']}", "case_id": row["case_id"],
            "metric": row["metric"], "config": row.get("config") or "",
            "config_label": "", "new_config": None, "unit": row["unit"],
            "direction": direction(row["metric"], row["unit"]),
            "points": _points(row, facts)} for row in rows]
    return label_configurations(out)


def label_configurations(series_list: list[dict]) -> list[dict]:
    """The series sorted by (case id, metric, first run); where a case and metric have
    several configurations, each series' id, config_label and new_config filled in
    (series()'s docstring). Pure: a series in query's shape, `config` its text."""
    def first(s: dict) -> tuple:
        return ((s["points"][0]["timestamp"], s["points"][0]["run_id"]) if s["points"]
                else (math.inf, ""))

    ordered = sorted(series_list, key=lambda s: (s["case_id"], s["metric"], first(s),
                                                 s.get("config") or ""))
    groups: dict[tuple[str, str], list[dict]] = {}
    for s in ordered:
        s.setdefault("config", "")
        s.setdefault("config_label", "")
        s.setdefault("new_config", None)
        groups.setdefault((s["case_id"], s["metric"]), []).append(s)
    for group in groups.values():
        if len(group) < 2:
            continue
        for k, s in enumerate(group):
            s["config_label"] = measurement_config.label(s["config"])
            s["id"] = f"{s['case_id']} :: {s['metric']} [{s['config_label']}]"
            if k == 0 or not s["points"]:
                continue
            start = s["points"][0]
            # The configuration measured last before this one's first run.
            at = (start["timestamp"], start["run_id"])
            earlier = [((p["timestamp"], p["run_id"]), other["config_label"])
                       for other in group[:k] for p in other["points"]
                       if (p["timestamp"], p["run_id"]) < at]
            before = max(earlier, key=lambda e: e[0], default=None)
            s["new_config"] = {
                "run_id": start["run_id"], "timestamp": start["timestamp"],
                "time": start["time"], "head_sha": start.get("head_sha") or "",
                "previous": before[1] if before else None}
    return ordered


def runs(store) -> list[dict]:
    """Every run, oldest first: run_id, timestamp, time, head_sha, head_branch, repo,
    workflow_id, name, source, rows, host (the first runner's hostname, else its type),
    versions."""
    out = []
    for row in store.rows(sql.runs()):
        stamp = int(row["timestamp"])
        if limits.time_problem(stamp):  # named by unusable(); no time to show
            continue
        host = row.pop("hostname") or row["runner_type"]
        row.pop("runner_type")
        deps = row.pop("dependencies")
        out.append({**row, "timestamp": stamp, "time": iso(stamp), "host": host,
                    "rows": int(row["rows"]), "workflow_id": int(row["workflow_id"]),
                    "versions": versions(deps)})
    return out
