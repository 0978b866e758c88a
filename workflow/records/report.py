"""Aggregation: case records -> results/report.json, validated before it is written;
and the one reader of a report (`read_report`) every command that reads one uses."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import jsonschema

from workflow.errors import ConfigError, key_path
from workflow.records import provenance, schemas
from workflow.records.case import SCHEMA_VERSION
from workflow.records.storage import read_json_file


def report_schema() -> dict:
    return schemas.load("report")


def validate_report(report: dict) -> None:
    """Raises jsonschema.ValidationError naming the first offending path."""
    schemas.validator(report_schema()).validate(report)


def build_report(cases: list[dict], *, suite_name: str, config_hash: str,
                 config_source: str, git_sha: str | None = None,
                 notes: list[str] = ()) -> dict:
    """The report of `cases`; `git_sha` is the code's commit (backends/git.py: records
    runs no tool), None where it is unknown; `notes` what the suite changed of its
    files' own settings (planning.plan.report_notes), in provenance.notes when any."""
    starts = [c["provenance"].get("started_at") for c in cases if c["provenance"].get("started_at")]
    report = {
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "provenance": {
            "suite_name": suite_name,
            "config_source": config_source,
            "config_hash": config_hash,
            "git_sha": git_sha,
            "versions": provenance.versions(),
            "host": provenance.host(),
            "started_at": min(starts) if starts else None,
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        },
        "cases": sorted(cases, key=lambda c: c["id"]),
    }
    if notes:
        report["provenance"]["notes"] = list(notes)
    return report


# --- reading a report back -------------------------------------------------------------

# The major version of the report schema this benchflow reads (minors only add fields).
READ_MAJOR = SCHEMA_VERSION.split(".", 1)[0]
# Known `kind`s of other benchflow JSON files, named when one is given as a report.
_OTHER_KINDS = {"benchflow-goldens": "a goldens file (written by `benchflow bless`)"}


class ReportError(ConfigError):
    """A file given as a report that is not one: `problem` says why, in one line."""

    def __init__(self, path: str | Path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__([f"{path}: {problem}"])


def _where(error, root: str = "") -> str:
    parts = ([root] if root else []) + list(error.absolute_path)
    # key_path: a key holding a newline or a tab is shown quoted, so the problem stays one line
    return key_path(parts) if parts else "(top level)"


def _schema_problem(doc, schema: dict, what: str, root: str = "") -> str | None:
    """The most relevant schema violation of `doc` as one line, with how many more."""
    if schemas.fast_valid(schema, doc):
        return None
    errors = list(schemas.validator(schema).iter_errors(doc))
    if not errors:
        return None
    best = jsonschema.exceptions.best_match(errors)
    while best.context:  # a oneOf/anyOf: what the branch of the right type missed
        inner = [e for e in best.context if e.validator != "type"]
        if not inner:
            break
        best = jsonschema.exceptions.best_match(inner)
    where = _where(best, root)
    path = list(best.absolute_path)
    if isinstance(doc, list):  # a list of cases
        path = ["cases", *path]
        doc = {"cases": doc}
    if len(path) >= 2 and path[0] == "cases" and isinstance(path[1], int):
        case = doc["cases"][path[1]]
        if isinstance(case, dict) and isinstance(case.get("id"), str):
            where += f" (case {case['id']})"
    message = " ".join(best.message.split("\n"))
    message = message if len(message) <= 160 else message[:157] + "..."
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return f"not a valid {what}: {where}: {message}{more}"


def _load_json(path: Path, *, forge_nan: bool):
    """The JSON document at `path`; NaN and Infinity refused, unless forge_nan and the
    document is a Forge results list (Forge writes json.dumps' defaults)."""
    from workflow.records.results_file import is_forge_results

    if path.is_dir():
        raise ReportError(path, "is a directory, not a report file")
    try:
        return read_json_file(path, constants_ok=is_forge_results if forge_nan else None)
    except ConfigError as exc:
        problem = exc.problems[0].removeprefix(f"{path}: ")
        if problem == "empty file":
            problem = "empty file, not a report"
        elif problem.startswith("not UTF-8"):
            problem += ": not a report"
        raise ReportError(path, problem) from None


def _check_version(path: Path, doc: dict, what: str) -> None:
    version = doc.get("schema_version")
    if version is None:
        raise ReportError(path, f"no schema_version: not a benchflow {what}")
    if not isinstance(version, str) or not re.fullmatch(r"[0-9]+\.[0-9]+", version):
        raise ReportError(path, f"schema_version {version!r}: expected \"MAJOR.MINOR\"")
    if version.split(".", 1)[0] != READ_MAJOR:
        raise ReportError(path, f"schema_version {version}: this benchflow reads {what}s "
                                f"of schema {READ_MAJOR}.x only (a newer benchflow wrote it?)")


def _with_case_fields(schema: dict, case_requires: tuple[str, ...]) -> dict:
    """`schema` whose case definition also requires `case_requires` (fields every case
    record has, that the schema leaves optional but a reader needs)."""
    if not case_requires:
        return schema
    case = schema["$defs"]["case"]
    required = case["required"] + [f for f in case_requires if f not in case["required"]]
    return {**schema, "$defs": {**schema["$defs"], "case": {**case, "required": required}}}


def _case_list_schema(case_requires: tuple[str, ...] = ()) -> dict:
    schema = _with_case_fields(report_schema(), case_requires)
    return {"$schema": schema["$schema"], "$defs": schema["$defs"],
            "type": "array", "items": {"$ref": "#/$defs/case"}}


@cache
def _case_schema() -> dict:
    schema = report_schema()
    return {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/case"}


@cache
def _case_validator():
    return schemas.validator(_case_schema())


def case_problem(record) -> str | None:
    """Why `record` (a case record read back from its file) is not one the report may
    hold, in one line (key path and what was expected), or None when it is."""
    if _case_validator().is_valid(record):  # one compiled validator: the common case
        return None
    return _schema_problem(record, _case_schema(), "case record")


def duplicate_case_problem(cases: list[dict]) -> str | None:
    """The first case id a report holds twice, with both indices, or None. A report has
    one record per case: readers key cases by id (compare, the gate, bless), so a second
    copy would be dropped or win without a word. Not asked of a results file (`-o`),
    which gets a record appended on every run of a case."""
    first: dict[str, int] = {}
    for i, case in enumerate(cases):
        j = first.setdefault(case["id"], i)
        if j != i:
            return (f"cases[{i}]: case id {case['id']!r} again (first at cases[{j}]); "
                    "expected each case once")
    return None


def read_report(path: str | Path, *, results_files: bool = False,
                case_requires: tuple[str, ...] = (), parsed=None) -> dict:
    """The report at `path`, checked: JSON (no NaN/Infinity), an object, a schema version
    of the major this benchflow reads, valid against report.schema.json, each case id
    once (duplicate_case_problem).

    With results_files, a `benchflow run -o` results file is read too: benchflow's
    (`{"kind": "benchflow-results", "cases": [...]}`, its cases checked against the
    report's case schema) or a Forge list, returned as {"kind": ..., "cases": [the
    benchflow case records it holds]} (entries Forge wrote itself hold none).

    case_requires: fields the caller reads that the schema leaves optional (every case
    record has them), required of every case too.

    parsed: the document as the caller already parsed it from `path`, holding no NaN or
    Infinity (the history importer parses a file to tell its kind; a 10,000-case report
    takes 0.7 s to parse), checked here as if read.

    Raises ReportError ("file: problem", one line) for anything else."""
    from workflow.records.results_file import FORGE_RECORD_KEY, KIND, is_forge_results

    path = Path(path)
    doc = _load_json(path, forge_nan=results_files) if parsed is None else parsed
    expected = ("a report (an object with schema_version and cases)" if not results_files else
                "a report or a `benchflow run -o` results file")
    if isinstance(doc, list):
        if results_files and is_forge_results(doc):
            cases = [e[FORGE_RECORD_KEY] for e in doc if isinstance(e.get(FORGE_RECORD_KEY), dict)]
            problem = _schema_problem(cases, _case_list_schema(case_requires),
                                      "Forge results file", root="entries")
            if problem:
                raise ReportError(path, problem)
            return {"kind": "forge-results", "cases": cases}
        raise ReportError(path, f"a JSON list, not {expected}")
    if not isinstance(doc, dict):
        raise ReportError(path, f"a JSON {type(doc).__name__}, not {expected}")
    kind = doc.get("kind")
    if kind in _OTHER_KINDS:
        raise ReportError(path, f"{_OTHER_KINDS[kind]}, not {expected}")
    if kind == KIND:
        if not results_files:
            raise ReportError(path, "a `benchflow run -o` results file, not a report: pass "
                                    "the report.json of a suite run")
        _check_version(path, doc, "results file")
        schema = {**_case_list_schema(case_requires), "type": "object", "required": ["cases"],
                  "properties": {"cases": {"type": "array", "items": {"$ref": "#/$defs/case"}}}}
        schema.pop("items")
        problem = _schema_problem(doc, schema, "results file")
        if problem:
            raise ReportError(path, problem)
        return doc
    if kind is not None:
        raise ReportError(path, f"a file of kind {kind!r}, not {expected}")
    _check_version(path, doc, "report")
    problem = (_schema_problem(doc, _with_case_fields(report_schema(), case_requires), "report")
               or duplicate_case_problem(doc["cases"]))
    if problem:
        raise ReportError(path, problem)
    return doc
