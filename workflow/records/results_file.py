"""Forge's `-o OUT.json`: a results file that `benchflow run` appends case records to.

The file is `{"schema_version": ..., "kind": "benchflow-results", "cases": [...]}`, the
same `cases` list as results/report.json, so readers of a report (`benchflow coverage
--report`) read it too. Appending is safe against concurrent writers (several
`benchflow run -o same.json` at once) and never damages what is there:

- writers serialize on a lock (filelock) of a side file `OUT.json.lock` (not OUT.json
  itself: it is replaced on every write, and a lock on a replaced inode protects nothing);
- the new content is written by storage.write_json: a temporary file in the same
  directory, flushed to disk, then os.replace()d over OUT.json, so a reader or a crash
  sees the old or the new file whole, and OUT.json keeps its mode;
- an existing file that is not a results file (bad JSON, another format) is refused
  with an error naming it, and left as it was.
"""

from __future__ import annotations

import json
from pathlib import Path

from filelock import FileLock

from workflow.records.case import SCHEMA_VERSION
from workflow.records.storage import write_json

KIND = "benchflow-results"


class ResultsFileError(Exception):
    """OUT.json exists but cannot be appended to without losing what it holds."""


def read_results(path: str | Path) -> dict:
    """The results document at `path`; a new empty one when the file is missing or empty.

    Raises ResultsFileError for anything else that is not a results document."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return new_document()
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
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        raise ResultsFileError(
            f"{path}: valid JSON but not a benchflow results file (expected an object with a "
            "'cases' list); left untouched, not appending: pass another -o")
    return doc


def new_document() -> dict:
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "cases": []}


def append_records(path: str | Path, records: list[dict]) -> int:
    """Appends case records to the results file at `path` (created when missing) and
    returns how many records it holds now."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.with_name(path.name + ".lock")):
        # Read inside the lock: another writer's records, appended since, are kept.
        doc = read_results(path)
        doc["cases"].extend(records)
        write_json(path, doc)
        return len(doc["cases"])
