"""results/ab.json: the interleaved A/B comparisons, one row per SKU pair and workload
(workflow/schemas/ab.schema.json), and its reading back: checked against its schema
(read_ab) and against the pair records it was built from (differences), so that a hand
edit is never taken for a measurement."""

from __future__ import annotations

from pathlib import Path

from workflow.errors import ConfigError
from workflow.records import schemas
from workflow.records.storage import read_json_file

# 1.1: IREE rows say their rounds' invocation settings (`invocation`), every row what
# would decide it when inconclusive (`to_decide`); optional, added alike without a bump
# (issue 25): IREE rows' `kernels` and `attribution`; (issue 37) the top-level `repair`.
SCHEMA_VERSION = "1.1"

# How much of a differing value a message quotes: enough to recognise it, never a list
# of a hundred round times.
_QUOTED = 60


def validate_ab(doc: dict) -> None:
    """Raises jsonschema.ValidationError naming the first field that is wrong: written
    only when valid, so a bug of ours fails the job instead of leaving a bad file."""
    schemas.validator(schemas.load("ab")).validate(doc)


def read_ab(path: str | Path, *, rows_only: bool = False) -> dict:
    """An ab.json read back for the gate and the renders: a regular JSON file holding an
    object valid against ab.schema.json (check_ab). Anything else is a ConfigError of one
    line naming the file, the key and what was expected."""
    return check_ab(read_json_file(path), path, rows_only=rows_only)


def check_ab(doc, source: str | Path, *, rows_only: bool = False) -> dict:
    """`doc` (ab.json's content, from `source`) when it is an object valid against
    ab.schema.json (rows_only: its `pairs` valid, what a render reads), whose rows then
    have every field the readers use; else a ConfigError of one line naming the file,
    the key and what was expected (a wrong type or value first: a retyped verdict also
    misses the fields of its branch, which only repeats it)."""
    if not isinstance(doc, dict):
        raise ConfigError([f"{source}: a JSON {type(doc).__name__}, not A/B results (an "
                           "object with schema_version and pairs, as `benchflow ab` writes)"])
    schema = schemas.load("ab")
    if rows_only:
        schema = {"$defs": schema["$defs"], "type": "object", "required": ["pairs"],
                  "properties": {"pairs": schema["properties"]["pairs"]}}
    problems = schemas.schema_problems(doc, schema, str(source))
    if problems:
        first = next((p for p in problems if not p.endswith("is a required property")),
                     problems[0])
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise ConfigError([first + more])
    return doc


def _quoted(value) -> str:
    text = repr(value)
    return text if len(text) <= _QUOTED else text[:_QUOTED - 3] + "..."


def row_name(row: dict) -> str:
    """A row as `base -> new workload`, for a message."""
    return f"{row.get('base')} -> {row.get('new')} {row.get('workload')}"


def differences(path: str | Path, doc: dict, records: list[tuple[str, dict]]) -> str | None:
    """How ab.json's rows differ from the pair records they were built from ((record
    path, record) in the order the rule lists them), as one line naming the row and the
    first key that differs, or None when every row is its record. A row edited, dropped,
    added or reordered is found; the records are the measurement, ab.json their copy."""
    rows = doc["pairs"]
    if len(rows) != len(records):
        return (f"{path}: pairs: {len(rows)} row(s), but the suite's pairs have "
                f"{len(records)} record(s); expected one row per record")
    for i, (row, (source, record)) in enumerate(zip(rows, records, strict=True)):
        if row == record:
            continue
        key = next(k for k in sorted(set(row) | set(record), key=str)
                   if row.get(k, ...) != record.get(k, ...))
        here = _quoted(row[key]) if key in row else "absent"
        there = _quoted(record[key]) if key in record else "absent"
        return (f"{path}: pairs[{i}] ({row_name(record)}): {key}: {here} here, {there} in "
                f"its record {source}; expected the record's row as measured")
    return None
