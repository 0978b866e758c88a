"""A run as every importer makes it (`Run`, `make_run`, its content's id `run_id_of`)
and the readers the importers share: a string column's value (`text_field`), a time
(`unix_time`, `need_time`), a case id of naming fields (`case_id`), and the one-line
problem naming the file and key (`problem`).

Its own module because the package's `read_runs` imports each importer and each
importer needs these: kept in the package's __init__ they made the two import each
other. Imports errors and importers/values.py only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from workflow.errors import ConfigError
from workflow.history.importers import values

SOURCES = ("benchflow-report", "forge", "torchao-csv", "v3")
# The run metadata columns an importer may take from the file (history/runs.py fills
# the rest).
META_KEYS = ("repo", "head_branch", "head_sha", "workflow_id", "run_attempt", "job_id",
             "name")


@dataclass
class Run:
    run_id: str       # 16 hex: run_id_of(rows, timestamp)
    source: str       # one of SOURCES
    path: str         # the file it came from
    timestamp: int    # unix seconds, when measured
    meta: dict = field(default_factory=dict)   # META_KEYS the file has
    rows: list[dict] = field(default_factory=list)
    # Entries of the file that gave no rows and why (a Forge entry with "error": a
    # failed run has no numbers), "entries[3]: ..." each.
    skipped: list[str] = field(default_factory=list)
    # The cases (a Forge file's entries) the run was made of, rows or not: a run of
    # failed cases has none of its own, and is named "nothing ingestible" by them.
    cases: int = 0


def run_id_of(rows: list[dict], timestamp: int) -> str:
    """What was measured, not how the file spelled it: each row's case, metric, values
    and measured time, and the run's time (hashing whole rows took 2.5 s of a 10,000-case
    report's 5 s of ingest)."""
    text = json.dumps([[r["benchmark"].get("extra_info", {}).get("case_id"),
                        r["metric"].get("name"), r.get("timestamp"),
                        r["metric"].get("benchmark_values")] for r in rows])
    return hashlib.sha256(f"{text}{int(timestamp)}".encode()).hexdigest()[:16]


def make_run(source: str, path: Path, timestamp: int, rows: list[dict],
             meta: dict | None = None, skipped: list[str] | None = None,
             cases: int | None = None) -> Run:
    """`cases`: how many the file's run was made of (default: the rows' case ids)."""
    meta = {k: v for k, v in (meta or {}).items() if k in META_KEYS and v not in (None, "")}
    if cases is None:
        cases = len({r["benchmark"].get("extra_info", {}).get("case_id") for r in rows})
    return Run(run_id=run_id_of(rows, timestamp), source=source, path=str(path),
               timestamp=int(timestamp), meta=meta, rows=rows, skipped=list(skipped or []),
               cases=cases)


def problem(path: Path, key: str, what: str, expected: str) -> ConfigError:
    """`<file>: <key>: <problem>; expected <what>`, one line."""
    where = f"{key}: " if key else ""
    return ConfigError([f"{path}: {where}{what}; expected {expected}"])


def json_type(value) -> str:
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "a list", str: "a string"}.get(type(value), "a number")


def shown(value) -> str:
    out = json.dumps(value, default=str)
    return out if len(out) <= 60 else out[:57] + "..."


def text_field(path: Path, where: str, value, default: str) -> str:
    """A string column's value: a string, or a number's text (as ClickHouse reads a JSON
    number into a String column); absent or empty, `default`. A list, an object or a
    boolean is refused: stored, it would be Python's repr of it."""
    if value is None or value == "" or value == 0:
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise problem(path, where, f"{shown(value)} is {json_type(value)}", "a string")


def unix_time(value, path: Path, key: str) -> int:
    """Unix seconds of an ISO-8601 time (naive ones taken as UTC), a Forge date
    ("%y-%m-%d": its code's commit day, the only date Forge writes) or a number."""
    if isinstance(value, bool) or value is None or value == "":
        raise problem(path, key, f"{value!r} is no time", "an ISO-8601 time or unix seconds")
    seconds = _seconds(value)
    if seconds is None:
        raise problem(path, key, f"{str(value).strip()!r} is no time",
                      "an ISO-8601 time or unix seconds")
    # The table's UInt64 column would wrap a time before 1970, and a millisecond epoch
    # would be a run thousands of years ahead, the newest of every series from then on.
    bad = values.time_problem(seconds)
    if bad:
        raise problem(path, key, bad, "unix seconds (or ISO-8601) of a time since 1970, "
                      "not later than now")
    return int(seconds)


def _seconds(value) -> float | None:
    """Unix seconds of a number, a numeric text, an ISO-8601 time or a Forge date; None
    when it is none of them."""
    if isinstance(value, int | float):
        return float(value) if isinstance(value, float) else value
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    for parse in (datetime.fromisoformat, lambda t: datetime.strptime(t, "%y-%m-%d")):
        try:
            when = parse(text)
            return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
        except (ValueError, OverflowError, OSError):
            continue
    return None


def need_time(path: Path, timestamp: int | None, why: str) -> int:
    """The caller's time for a file that holds none (`why` says which)."""
    if timestamp is None:
        raise problem(path, "", f"{why}, so it cannot say when it was measured",
                      "--timestamp (unix seconds or ISO-8601) for it")
    return int(timestamp)


def case_id(prefix: str, *parts) -> str:
    """A case id made of fields that name a case (never of measured values): each part
    as text, '-' for an absent one, '/'-joined, spaces as '_' (ids stay one word)."""
    text = [str(p).strip().replace(" ", "_").replace("/", "_") if p not in (None, "")
            else "-" for p in parts]
    return "/".join([prefix, *text])
