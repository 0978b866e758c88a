"""Ingest: runs (history/importers.py's Run) into the store as full v3 rows, each
measurement once.

A row is known by its measurement id (metric.extra_info["measurement_id"]: a hash of its
case, metric, measured time and values), not by the file it came in: a report ingested
twice, under any name, adds nothing, and so does a report rebuilt from cached case
records, or the cached cases of a report where only some were measured again (their
numbers are the earlier run's, already held; a series gets a point only for a run that
measured it). A run none of whose rows is new is "already" held. Each row is the
uploader's record, `{**metadata, **result}` as test-infra's upload_benchmark_results
builds it: the metadata columns (history/runs.py) and the importer's row, with the run id
and source in benchmark.extra_info and its own `timestamp` where the importer knows when
that row was measured (a benchflow case's measured_at), else the run's."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from functools import cache

import jsonschema

from workflow.errors import ConfigError, key_path
from workflow.history import runs as runmeta
from workflow.history import sql
from workflow.records import schemas
from workflow.render import dashboard

# The v3 columns a row may carry besides the metadata (the dashboard record's keys, and
# its own measured time).
ROW_KEYS = ("benchmark", "model", "inputs", "dependencies", "runners", "metric",
            "timestamp")
# Rows per INSERT: one statement's JSON stays tens of MB however many runs come at once.
CHUNK_ROWS = 50_000
# Measured times per query of the ids held (each up to 21 characters with its comma).
STAMPS_PER_QUERY = 5_000


def full_rows(run, meta: Mapping) -> list[dict]:
    """The run's rows with its metadata columns; benchmark.extra_info gets the run id
    and source (copied: an importer's rows may share one benchmark dict)."""
    head = {"timestamp": int(run.timestamp), "schema_version": "v3", **meta}
    out, benches = [], {}
    for row in run.rows:
        # One copy per shared benchmark dict, so that the rows still share it and the
        # store encodes it once (store.json_lines).
        bench = benches.get(id(row["benchmark"]))
        if bench is None:
            bench = dict(row["benchmark"])
            bench["extra_info"] = {**bench["extra_info"], "run_id": run.run_id,
                                   "source": run.source}
            benches[id(row["benchmark"])] = bench
        full = {**head, **row, "benchmark": bench}
        metric = row["metric"]
        full["metric"] = {**metric, "extra_info": {
            **metric.get("extra_info", {}),
            "measurement_id": measurement_id(bench["extra_info"].get("case_id", ""),
                                             full["timestamp"], metric)}}
        out.append(full)
    return out


def measurement_id(case_id: str, timestamp: int, metric: dict) -> str:
    """16 hex: the case, the metric, when it was measured and its values (repr of the
    float list: exact and about 5x cheaper than json.dumps over 70,000 rows)."""
    text = f"{case_id}\0{metric.get('name')}\0{int(timestamp)}\0" \
           f"{metric.get('benchmark_values')!r}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def check_rows(run) -> None:
    """Every row as the dashboard schema's record (the v3 shape with string maps) and
    nothing outside the v3 columns: one line naming the file and the first bad path.
    All rows are checked at once by jsonschema-rs (records/schemas.fast_valid: 70,000
    rows in about 0.1 s); only a run that fails is walked row by row for the wording."""
    for i, row in enumerate(run.rows):
        extra = sorted(set(row) - set(ROW_KEYS))
        if extra:
            raise ConfigError([f"{run.path}: rows[{i}]: {', '.join(extra)}: not a v3 "
                               f"record column; expected only {', '.join(ROW_KEYS)}"])
    if schemas.fast_valid(dashboard.schema(), run.rows):
        return
    validator = record_validator()
    for i, row in enumerate(run.rows):
        error = jsonschema.exceptions.best_match(validator.iter_errors(row))
        if error is not None:
            where = key_path([f"rows[{i}]", *error.absolute_path])
            raise ConfigError([f"{run.path}: {where}: {error.message}; expected a v3 "
                               "record as workflow/schemas/dashboard.schema.json"])


@cache
def record_validator():
    """The dashboard schema's one record (its items), refs resolved in the whole."""
    whole = dashboard.schema()
    return schemas.validator({**whole["$defs"]["record"], "$defs": whole["$defs"]})


def ingest(store, runs: list, meta_overrides: Mapping | None = None, *,
           env: Mapping[str, str] | None = None,
           git_facts: Callable[[], Mapping[str, str]] | None = None) -> dict:
    """Adds the measurements the store lacks. `env`: the CI variables (os.environ by
    default); `git_facts`: backends/git.py's head_facts of the suite's directory, asked
    only when a run's metadata still lacks what git can say. Returns {"ingested":
    [run_id...] (runs that added rows), "already": [run_id...] (runs whose every row
    the store held), "empty": [run_id...] (runs with no row at all: every case failed or
    without a finite value), "rows": n}, run ids in the order given."""
    env = os.environ if env is None else env
    facts = _once(git_facts)
    candidates = []
    for run in runs:
        check_rows(run)
        candidates.append((run, full_rows(run, runmeta.run_meta(env, run.meta,
                                                                meta_overrides, facts))))
    stamps = sorted({row["timestamp"] for _, rows in candidates for row in rows})
    held = set()
    # A batch at a time: a report whose 30,000 cases each have their own measured time
    # would otherwise list 360 KB of times in one statement, past ClickHouse's
    # max_query_size (256 KiB).
    for start in range(0, len(stamps), STAMPS_PER_QUERY):
        batch = stamps[start:start + STAMPS_PER_QUERY]
        held |= {r["measurement_id"] for r in store.rows(sql.known_measurements(batch))}
    new_rows, ingested, already, empty = [], [], [], []
    for run, rows in candidates:
        if not rows:  # never in the history, nor ever will be: not "already" there
            empty.append(run.run_id)
            continue
        fresh = [row for row in rows if _mid(row) not in held]
        held.update(_mid(row) for row in fresh)
        (ingested if fresh else already).append(run.run_id)
        new_rows += fresh
    try:
        for start in range(0, len(new_rows), CHUNK_ROWS):
            store.insert(new_rows[start:start + CHUNK_ROWS])
    except BaseException:
        # All or nothing: a run stopped between two chunks (Ctrl-C, a full disk) is not
        # kept in part (an embedded store's write is then undone at its close).
        store.abort()
        raise
    return {"ingested": ingested, "already": already, "empty": empty,
            "rows": len(new_rows)}


def _mid(row: dict) -> str:
    return row["metric"]["extra_info"]["measurement_id"]


def _once(git_facts):
    """git asked at most once per ingest, however many runs need it."""
    if git_facts is None:
        return None
    cache = []

    def facts():
        if not cache:
            cache.append(git_facts())
        return cache[0]
    return facts
