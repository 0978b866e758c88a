"""Importers: a file of runs -> `Run`s whose rows are v3 records (render/dashboard's
shape), whatever wrote the file. The kind is told by the content, never by the name (a
renamed report still imports):

- a benchflow report of any 1.x schema, a `benchflow run -o` results file, or a Forge
  list holding benchflow records (`benchflow.py`; rows = render/dashboard.records);
- Forge's own results: the list tt-forge's benchmark.py appends to, and tt-forge-fe's
  perf report object (`forge.py`);
- torchao microbenchmark CSVs, every column set torchao wrote (`torchao_csv.py`);
- v3 JSON / JSONEachRow as test-infra's uploader takes them (`v3.py`).

A run's id is its content's: sha256 over what its rows measured (case, metric, values,
measured time) and the run's time, first 16 hex digits; the same run read twice, from
any path, is one run. A file that cannot say when it was measured (torchao's CSV, a Forge
perf report, a v3 file without timestamps) takes the caller's `timestamp` (`--timestamp`);
without one it is a ConfigError naming the file."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from workflow.errors import ConfigError
from workflow.files import read_bytes
from workflow.history.importers import values
from workflow.records.storage import MAX_JSON_BYTES

SOURCES = ("benchflow-report", "forge", "torchao-csv", "v3")
# The run metadata columns an importer may take from the file (history/runs.py fills
# the rest).
META_KEYS = ("repo", "head_branch", "head_sha", "workflow_id", "run_attempt", "job_id",
             "name")
WHAT = ("a benchflow report or results file, a Forge results file, a torchao "
        "microbenchmark CSV, or v3 JSON/JSONEachRow records")


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


def read_runs(path: str | Path, timestamp: int | str | None = None) -> list[Run]:
    """The runs of the file at `path`, its kind told by its content. `timestamp`: when
    a file that holds no time was measured. Raises ConfigError (one line naming the
    file) for a file of no known kind or a broken one."""
    from workflow.history.importers import benchflow, forge, torchao_csv, v3

    path = Path(path)
    if timestamp is not None:
        timestamp = unix_time(timestamp, path, "--timestamp")
    raw = read_bytes(path, cap=MAX_JSON_BYTES, what=WHAT)
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        raise problem(path, "", "empty file", WHAT)
    doc, error, constants = _json(text)
    if error is None:
        if benchflow.detect(doc):
            # Parsed once: the report's reader checks this document (a benchflow report
            # never holds NaN; one that does is read again by it, and refused).
            return _checked(benchflow.runs(path, doc, timestamp, reuse=not constants))
        for module in (forge, v3):
            if module.detect(doc):
                return _checked(module.runs(path, doc, timestamp))
        raise problem(path, "", f"JSON of no known kind ({_shape(doc)})", WHAT)
    lines = v3.json_lines(text)
    if lines is not None:
        return _checked(v3.runs(path, lines, timestamp))
    if torchao_csv.detect(text):
        return _checked(torchao_csv.runs(path, text, timestamp))
    if text.lstrip()[:1] in "[{":
        raise problem(path, "", f"not valid JSON ({error})", WHAT)
    raise problem(path, "", "neither JSON, JSONEachRow nor a CSV with torchao's columns",
                  WHAT)


def _checked(runs: list[Run]) -> list[Run]:
    """Every importer's runs, each value as the table can hold it (importers/values.py)."""
    for run in runs:
        values.check_run(run)
    return runs


def _json(text: str):
    """(document, None, held NaN or Infinity), or (None, the parser's message, False).
    NaN and Infinity are read (Forge writes json.dumps' defaults); importers refuse them
    where they end up."""
    constants = []

    def constant(name: str) -> float:
        constants.append(name)
        return float(name.replace("Infinity", "inf"))

    try:
        doc = json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as exc:
        return None, f"{exc.msg} at line {exc.lineno} column {exc.colno}", False
    except (ValueError, RecursionError) as exc:
        return None, " ".join(str(exc).split()) or "nested too deeply", False
    return doc, None, bool(constants)


def _shape(doc) -> str:
    if isinstance(doc, dict):
        keys = sorted(doc)[:6]
        return f"an object with keys {keys}" if keys else "an empty object"
    if isinstance(doc, list):
        return f"a list of {len(doc)} item(s)"
    return f"a JSON {type(doc).__name__}"
