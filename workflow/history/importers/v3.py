"""v3 records as pytorch/test-infra's uploader takes them (.github/scripts/
upload_benchmark_results.py, read_benchmark_results / process_benchmark_results): a JSON
list, one JSON object, or JSONEachRow lines (each an object or a list of objects); a
record without "metric" is skipped, as upstream skips it. benchflow's own
results/dashboard.json is such a list.

Unlike upstream, which warns about and skips a line that is not JSON, every non-empty
line must be a v3 object here: a file with one is no v3 file (told by content, a CSV or
a log would otherwise import as "nothing").

Rows keep their own metadata columns: they are grouped into runs by (timestamp, repo,
head_branch, head_sha, workflow_id, run_attempt, job_id), as the uploader's metadata of
one job; a row without a timestamp takes the caller's --timestamp.

A row measured at a known time (benchmark.extra_info.measured_at, which benchflow's
dashboard.json carries) keeps it as its own `timestamp`, as the report's importer gives
it: the report and its dashboard.json are then the same measurements, ingested once; a
run of such rows with no timestamp at all is dated by its earliest.

Each row is brought to the table's shape (every tuple field present, every extra_info a
string map): a field of a tuple the table does not have goes to that tuple's extra_info
(e.g. a runner's total_mem_in_gb); an absent string field is "" where the table allows
it and "unknown" where benchflow's record needs a value (device, arch, dtype, a runner's
name and type, a dependency's version, a metric's unit where its name does not end
in "(unit)"); an absent mode is "inference"
with benchmark.extra_info mode_absent "true". A row without
benchmark.extra_info.case_id gets
    v3/<benchmark.name>/<model.name>/<model.backend>/<benchmark.dtype>/<device>/<arch>
('-' for an absent part; device and arch from benchmark.extra_info); a row with one
(benchflow's dashboard.json) keeps it. run_id and source, which ingest sets, are
dropped from a row's benchmark.extra_info (a re-imported export is the same run)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from workflow.history.importers.run import (
    META_KEYS,
    case_id,
    json_type,
    make_run,
    problem,
    shown,
    text_field,
    unix_time,
)
from workflow.render import dashboard

SOURCE = "v3"
ROW_KEYS = ("benchmark", "model", "inputs", "dependencies", "runners", "metric")
META_COLUMNS = ("timestamp", "schema_version", "name", "repo", "head_branch", "head_sha",
                "workflow_id", "run_attempt", "job_id", "servicelab_experiment_id",
                "servicelab_trial_id", "_meta")
GROUP = ("timestamp", "repo", "head_branch", "head_sha", "workflow_id", "run_attempt",
         "job_id")
RUNNER_STR = ("name", "type", "cpu_info", "mem_info", "gpu_info", "gpu_mem_info")
RUNNER_INT = ("cpu_count", "avail_mem_in_gb", "gpu_count", "avail_gpu_mem_in_gb")
INGEST_KEYS = ("run_id", "source")


def _is_record(obj) -> bool:
    return isinstance(obj, dict) and set(obj) <= set(ROW_KEYS) | set(META_COLUMNS)


def detect(doc) -> bool:
    if isinstance(doc, list):
        return all(_is_record(r) for r in doc)
    return _is_record(doc)


def json_lines(text: str) -> list[dict] | None:
    """The records of a JSONEachRow file, or None when it is not one."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            return None
        items = obj if isinstance(obj, list) else [obj]
        if not all(_is_record(r) for r in items):
            return None
        out += items
    return out or None


def _typed(path: Path, where: str, value, kind: type, default):
    """`value` when it is a `kind` (dict, list), `default` when absent (null); any other
    JSON type refused, naming the key: stored, it would be Python's repr of it, or a
    string's letters taken as a list's entries."""
    if value is None:
        return default
    if not isinstance(value, kind):
        raise problem(path, where, f"{shown(value)} is {json_type(value)}",
                      "an object" if kind is dict else "a list")
    return value


def _map(path: Path, where: str, value) -> dict[str, str]:
    return dashboard.strings(_typed(path, where, value, dict, {}))


def _tuple(path: Path, where: str, obj, strings: tuple, defaults: dict) -> dict:
    """A tuple's fields (str), the rest of the object into its extra_info."""
    obj = _typed(path, where, obj, dict, {})
    extra = _map(path, f"{where}.extra_info", obj.get("extra_info"))
    extra.update(dashboard.strings({k: v for k, v in obj.items()
                                    if k not in strings and k != "extra_info"}))
    out = {k: text_field(path, f"{where}.{k}", obj.get(k), defaults.get(k, "")) for k in strings}
    out["extra_info"] = extra
    return out


def _benchmark(path: Path, row: dict, where: str) -> dict:
    raw = _typed(path, f"{where}.benchmark", row.get("benchmark"), dict, {})
    model = _typed(path, f"{where}.model", row.get("model"), dict, {})
    bench = _tuple(path, f"{where}.benchmark", raw, ("name", "mode", "dtype"),
                   {"name": "unknown", "dtype": "unknown"})
    extra = {k: v for k, v in bench["extra_info"].items() if k not in INGEST_KEYS}
    if bench["mode"] not in ("inference", "training"):
        if bench["mode"]:
            extra["mode"] = bench["mode"]
        else:
            extra["mode_absent"] = "true"
        bench["mode"] = "inference"
    extra.setdefault("case_id", case_id(
        "v3", raw.get("name"), text_field(path, f"{where}.model.name", model.get("name"), ""),
        text_field(path, f"{where}.model.backend", model.get("backend"), ""), raw.get("dtype"),
        extra.get("device"), extra.get("arch")))
    extra.setdefault("device", "unknown")
    extra["arch"] = extra.get("arch") or "unknown"
    extra["device"] = extra["device"] or "unknown"
    bench["extra_info"] = extra
    return bench


def _model(path: Path, row: dict, where: str, bench: dict) -> dict:
    where = f"{where}.model"
    raw = _typed(path, where, row.get("model"), dict, {})
    model = _tuple(path, where, {k: v for k, v in raw.items() if k != "origins"},
                   ("name", "type", "backend"), {"name": "unknown", "type": "unknown"})
    listed = _typed(path, f"{where}.origins", raw.get("origins"), list, [])
    origins = [text_field(path, f"{where}.origins[{i}]", o, "") for i, o in enumerate(listed)]
    model["origins"] = [o for o in origins if o] or [bench["name"]]
    return model


def _metric(path: Path, row: dict, where: str) -> dict:
    raw = _typed(path, f"{where}.metric", row["metric"], dict, {})
    values = raw.get("benchmark_values")
    values = values if isinstance(values, list) else [values]
    for j, value in enumerate(values):
        # A finite number or a non-finite one (dropped below, as before), null included:
        # ClickHouse's JSON output writes NaN and Inf as null, so an exported v3 table
        # reads back so. Anything else (a string, a boolean, a list) is no measured value.
        if value is not None and (isinstance(value, bool)
                                  or not isinstance(value, int | float)):
            raise problem(path, f"{where}.metric.benchmark_values[{j}]",
                          f"{shown(value)} is {json_type(value)}", "a number")
    nums = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)
            and math.isfinite(v)]
    name = text_field(path, f"{where}.metric.name", raw.get("name"), "")
    if not name or not nums:
        raise problem(path, f"{where}.metric", "no name or no finite benchmark_values",
                      "a v3 metric {name, benchmark_values: [number, ...]}")
    target = raw.get("target_value")
    extra = _map(path, f"{where}.metric.extra_info", raw.get("extra_info"))
    # A name ending in "(unit)" says its unit, as upstream's "..._usage(mb)" and
    # benchflow's "latency median (ms)" do.
    tail = name.rstrip()
    named = tail[tail.rfind("(") + 1:-1].strip() if tail.endswith(")") and "(" in tail else ""
    extra["unit"] = extra.get("unit") or named or "unknown"
    return {"name": name, "benchmark_values": [float(v) for v in nums],
            "target_value": float(target) if isinstance(target, int | float)
            and math.isfinite(target) else 0.0, "extra_info": extra}


def _runner(path: Path, where: str, raw) -> dict:
    out = _tuple(path, where, raw, RUNNER_STR, {"name": "unknown", "type": "unknown"})
    for key in RUNNER_INT:
        value = (raw or {}).get(key) if isinstance(raw, dict) else None
        out.pop(key, None)
        out["extra_info"].pop(key, None)
        out[key] = _whole(value)
    return out


def _whole(value):
    """A runner's count as its UInt32 column takes it: absent or not a number is 0 (as
    before), a whole float its int; any other number is kept as it is, for
    importers/values.py to refuse (a column would wrap it or round it)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def normal_row(path: Path, row: dict, where: str) -> dict:
    """One v3 record in the table's shape, without its metadata columns."""
    bench = _benchmark(path, row, where)
    runners = _typed(path, f"{where}.runners", row.get("runners"), list, [])
    deps = _typed(path, f"{where}.dependencies", row.get("dependencies"), dict, {})
    inputs = _typed(path, f"{where}.inputs", row.get("inputs"), dict, {})
    return {
        "benchmark": bench, "model": _model(path, row, where, bench),
        "inputs": {str(k): _tuple(path, f"{where}.inputs.{k}", v, ("dtype",), {})
                   for k, v in inputs.items()},
        "dependencies": {str(k): _tuple(path, f"{where}.dependencies.{k}", v,
                                        ("repo", "branch", "sha", "version"),
                                        {"version": "unknown"}) for k, v in deps.items()},
        "runners": [_runner(path, f"{where}.runners[{i}]", r) for i, r in enumerate(runners)]
        or [dashboard.runner({})],
        "metric": _metric(path, row, where),
    }


def runs(path: Path, doc, timestamp: int | None) -> list:
    records = doc if isinstance(doc, list) else [doc]
    groups: dict[tuple, list] = {}
    for i, rec in enumerate(records):
        if "metric" not in rec:  # upstream: "not a benchmark record, skipping"
            continue
        where = f"records[{i}]"
        row = normal_row(path, rec, where)
        measured = row["benchmark"]["extra_info"].get("measured_at")
        if measured:
            row["timestamp"] = unix_time(measured, path,
                                         f"{where}.benchmark.extra_info.measured_at")
        if rec.get("timestamp") not in (None, "", 0):
            when = unix_time(rec["timestamp"], path, f"{where}.timestamp")
        elif timestamp is not None:
            when = timestamp
        elif measured:
            when = None  # the run's time: its earliest measurement, once all are read
        else:
            raise problem(path, f"{where}.timestamp", "absent (a v3 file's rows need not "
                          "say when they ran)", "--timestamp (unix seconds or ISO-8601)")
        key = (when, *(str(rec.get(k) or "") for k in GROUP[1:]))
        groups.setdefault(key, []).append((rec, row))
    out = []
    for key, members in groups.items():
        meta = dict(zip(GROUP[1:], key[1:], strict=True))
        meta["name"] = str(members[0][0].get("name") or "")
        rows = [row for _, row in members]
        when = key[0] if key[0] is not None else min(row["timestamp"] for row in rows)
        out.append(make_run(SOURCE, path, when, rows,
                            {k: v for k, v in meta.items() if k in META_KEYS}))
    return out
