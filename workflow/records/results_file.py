"""Forge's `-o OUT.json`: a results file that `benchflow run` appends case records to.

Two formats are appended to, each in its own format:

- benchflow's: `{"schema_version": ..., "kind": "benchflow-results", "cases": [...]}`, the
  same `cases` list as results/report.json, so readers of a report (`benchflow coverage
  --report`) read it too. A missing or empty OUT.json becomes one of these.
- Forge's: the JSON list of result objects that tt-forge's benchmark.py writes and
  appends to (`[{"total_time", "total_samples", "samples_per_sec", "args": {...},
  "arch", "machine_name", "hash", "date"[, "error"]}, ...]`). It stays a list; the case
  record is appended as such an object (forge_entry), the full record under "benchflow".

Appending is safe against concurrent writers (several `benchflow run -o same.json` at
once) and never damages what is there:

- writers serialize on a lock (flock) of a side file `OUT.json.lock` (not OUT.json
  itself: it is replaced on every write, and a lock on a replaced inode protects
  nothing), removed when the last writer is done (storage.side_lock);
- the new content is written by storage.write_text: a temporary file in the same
  directory, flushed to disk, then os.replace()d over OUT.json, so a reader or a crash
  sees the old or the new file whole, and OUT.json keeps its mode;
- an existing file that is neither format (bad JSON, another document) is refused
  with an error naming it, and left as it was; so is an OUT.json that is no regular
  file (a FIFO, /dev/zero, a directory, a link loop or a dangling link), unread;
- an OUT.json that is a symbolic link is written through: its target is updated, the
  link kept (as cp and editors do), and the lock is the target's.

A record `benchflow run` did not measure (its case's jobs were up to date, so it is the
record an earlier run measured) is appended marked so (cached_record): its provenance
has `cached: {"appended_at": <UTC time>}`, and a Forge entry `"cached": true` beside it;
a measured record has neither key. Without the mark, two equal entries would read as
two measurements that agreed exactly.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from workflow.errors import ConfigError
from workflow.files import read_bytes, write_target
from workflow.records.case import SCHEMA_VERSION
from workflow.records.storage import MAX_JSON_BYTES, side_lock, write_json, write_text
from workflow.stats.enums import Status

KIND = "benchflow-results"
# Keys of every object Forge's benchmark.py appends (its error entries included): what
# tells its results file from any other JSON list.
FORGE_KEYS = ("args", "samples_per_sec")
# The key of a Forge entry that holds benchflow's whole case record.
FORGE_RECORD_KEY = "benchflow"
# The key, in a record's provenance (and a Forge entry), of an appended record that was
# not measured by the run that appended it (cached_record).
CACHED_KEY = "cached"
# benchflow dtypes -> Forge's -df names.
FORGE_DATAFORMATS = {"f32": "Fp32", "f16": "Fp16", "bf16": "Fp16_b"}


class ResultsFileError(Exception):
    """OUT.json exists but cannot be appended to without losing what it holds."""


def is_forge_results(doc) -> bool:
    """A Forge benchmark.py results file: a list of its result objects ([] included)."""
    return isinstance(doc, list) and all(
        isinstance(e, dict) and all(k in e for k in FORGE_KEYS) for e in doc)


def read_results(path: str | Path) -> dict | list:
    """The results at `path`: a benchflow results document (a new empty one when the file
    is missing or empty) or a Forge results list.

    Raises ResultsFileError for anything else."""
    path = Path(path)
    try:
        # A FIFO, a device (/dev/zero), a directory or a link loop is refused unread.
        text = read_bytes(path, cap=MAX_JSON_BYTES, what="a JSON results file",
                          os_errors=True).decode("utf-8")
    except FileNotFoundError:
        return new_document()
    except ConfigError as exc:
        raise ResultsFileError(f"{exc.problems[0]}; not appending") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsFileError(f"{path}: cannot read it ({exc}); not appending") from None
    if not text.strip():
        # Nothing to lose: e.g. a file made by `touch` or mktemp for the results.
        return new_document()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsFileError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            "left untouched, not appending: fix or move it, or pass another -o") from None
    if isinstance(doc, dict) and isinstance(doc.get("cases"), list):
        not_results_problem(path, doc)
        case_list_problem(path, doc["cases"])
        return doc
    if is_forge_results(doc):
        return doc
    raise ResultsFileError(
        f"{path}: valid JSON but neither a benchflow results file (an object with a "
        "'cases' list) nor a Forge benchmark.py one (a list of result objects, each with "
        f"{' and '.join(repr(k) for k in FORGE_KEYS)}); left untouched, not appending: "
        "pass another -o")


def not_results_problem(path: Path, doc: dict) -> None:
    """Raises ResultsFileError for a document with a `cases` list that is no results file:
    a report (results/report.json or a copy of it; no `kind`) or another kind of benchflow
    file. Appending would silently turn the user's report into a results file."""
    if doc.get("kind") == KIND:
        return
    what = (f"a document of kind {doc['kind']!r}" if "kind" in doc
            else "a benchflow report (no `kind`, as results/report.json)")
    raise ResultsFileError(
        f"{path}: {what}, not a `benchflow run -o` results file (kind {KIND!r}); left "
        "untouched, not appending: pass another -o")


def output_problem(path: str | Path) -> str | None:
    """Why `benchflow run -o path` could not append there, asked before anything is
    measured: the file itself (read_results' refusals), or a folder where neither the
    file nor its lock file can be created (read-only, not ours, a read-only file system).
    Tried, not judged by its mode bits: root may write a folder of mode 0555, nobody a
    read-only mount. None when it can."""
    try:
        read_results(path)
        target = write_target(path, what="a JSON results file")
    except ResultsFileError as exc:
        return str(exc)
    except ConfigError as exc:
        return f"{exc.problems[0]}; not appending"
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # append_records creates the rest
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=folder)
    except OSError as exc:
        return (f"{path}: cannot create files in {folder} ({exc.strerror or exc}); expected a "
                "folder benchflow can write the results file and its lock file in: pass "
                "another -o")
    os.close(fd)
    os.unlink(probe)
    return None


def case_list_problem(path: Path, cases: list) -> None:
    """Raises ResultsFileError naming the first entry of a results file's `cases` that
    is not an object: records are appended beside them and read back as case records, so
    a file holding a string, list, null or number there is no results file to extend."""
    for i, entry in enumerate(cases):
        if not isinstance(entry, dict):
            got = "null" if entry is None else type(entry).__name__
            raise ResultsFileError(
                f"{path}: cases[{i}]: expected an object (a case record), got {got}; "
                "left untouched, not appending: pass another -o")


def new_document() -> dict:
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "cases": []}


def cached_record(record: dict) -> dict:
    """A copy of `record` marked as reused, not measured, by the run appending it now:
    its provenance gains {CACHED_KEY: {"appended_at": ...}} (the case schema leaves a
    case's provenance open; when it was measured stays timing.measured_at)."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    provenance = {**(record.get("provenance") or {}), CACHED_KEY: {"appended_at": now}}
    return {**record, "provenance": provenance}


def forge_entry(record: dict, *, output: str | None = None, git_hash: str | None = None,
                date: str | None = None) -> dict:
    """A case record as the result object Forge's benchmark.py appends.

    Forge times `loop_count` pushes of a `microbatch` (its inputs[0].shape[0]) end to end;
    here each measured call is one push of the case's first input dimension, so
    total_samples = measured calls x shape[0], total_time = measured calls x the median
    call (seconds), samples_per_sec their ratio. A case that is not ok is written as Forge
    writes a failure: zeros and an "error". `layers` 0 is Forge's "the model's own"."""
    timing = record.get("timing") or {}
    shape = record.get("shape") or []
    microbatch = shape[0] if shape else 1
    # IREE: --benchmark_repetitions per invocation; torch: the timed calls per invocation.
    loop_count = timing.get("repetitions") or timing.get("calls_per_invocation")
    median_ms = timing.get("median_ms")
    entry: dict = {"total_time": 0.0, "total_samples": 0, "samples_per_sec": 0.0}
    if record.get("status") == Status.OK and median_ms and loop_count:
        calls = timing["invocations"] * loop_count
        entry.update(total_time=calls * median_ms / 1e3, total_samples=calls * microbatch,
                     samples_per_sec=microbatch * 1e3 / median_ms)
    entry["args"] = {
        "model": record.get("model"), "config": record.get("config"),
        "training": record.get("mode") == "training",
        "dataformat": FORGE_DATAFORMATS.get(record.get("dtype"), record.get("dtype")),
        "loop_count": loop_count, "layers": record.get("layers") or 0,
        "microbatch": microbatch, "output": output,
        # benchflow's own options, as vars(args) of `benchflow run` would hold them.
        "sku": record.get("sku"), "backend": record.get("backend"),
        "recipe": record.get("recipe"), "shape": shape,
    }
    entry["arch"] = record.get("sku")
    entry["machine_name"] = (record.get("provenance") or {}).get("host") or socket.gethostname()
    entry["hash"] = git_hash
    entry["date"] = date
    if record.get("status") != Status.OK:
        where = f" at {record['stage']}" if record.get("stage") else ""
        entry["error"] = f"{record.get('status')}{where}: {record.get('error') or ''}".strip()
    if CACHED_KEY in (record.get("provenance") or {}):
        # Where a Forge reader looks: a reader summing samples must not count it twice.
        entry[CACHED_KEY] = True
    entry[FORGE_RECORD_KEY] = record
    return entry


def append_records(path: str | Path, records: list[dict], *,
                   forge: dict | None = None) -> int:
    """Appends case records to the results file at `path` (created when missing) and
    returns how many entries it holds now. A Forge results list gets forge_entry()s,
    with `forge` (output, git_hash, date) as their run's details."""
    try:
        # A link is written through, the link kept; its lock sits beside the target, so
        # writers through different links to one file still take turns.
        path = write_target(path, what="a JSON results file")
    except ConfigError as exc:
        raise ResultsFileError(f"{exc.problems[0]}; not appending") from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with side_lock(path.with_name(path.name + ".lock")):
            # Read inside the lock: another writer's records, appended since, are kept.
            doc = read_results(path)
            if isinstance(doc, list):
                doc.extend(forge_entry(r, **(forge or {})) for r in records)
                # As Forge writes it: one line, json.dumps' defaults (NaN allowed).
                write_text(path, json.dumps(doc))
                return len(doc)
            doc["cases"].extend(records)
            write_json(path, doc)
            return len(doc["cases"])
    except OSError as exc:
        # The folder became unwritable or the disk filled after output_problem's look:
        # write_text left the file as it was (atomic), so say so in one line.
        reason = exc.strerror or str(exc)
        raise ResultsFileError(f"{path}: could not append ({reason}); left as it was, "
                               "the case record is in the work directory's report") from None
