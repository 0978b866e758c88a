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
without one it is a ConfigError naming the file.

`run.py` holds `Run` and what every importer builds one with (run ids, string columns,
times, case ids, one-line problems); this module reads a file and hands it to the
importer its content names.
"""

from __future__ import annotations

import json
from pathlib import Path

from workflow.files import read_bytes
from workflow.history.importers import values
from workflow.history.importers.run import Run, problem, unix_time
from workflow.records.storage import MAX_JSON_BYTES

WHAT = ("a benchflow report or results file, a Forge results file, a torchao "
        "microbenchmark CSV, or v3 JSON/JSONEachRow records")


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
