"""`benchflow validate`'s work (cli/validate.py prints what `validate_files` returns):
every problem of suite, benchmark and golden files, without running anything.

Kinds are told apart by content, not by name, so that a file can live anywhere: golden
files carry `"kind": "benchflow-goldens"`; a JSON object with `function_run`, `inputs`
or a `golden_*` object is a sharktank-format benchmark file; anything else is a suite.
"""

from __future__ import annotations

import json
from pathlib import Path

from workflow.errors import ConfigError


def validate_files(files: list[str | Path]) -> list[str]:
    """Every problem of `files`, each naming its file and key path; [] when all are valid."""
    from workflow.suite.load import load

    problems: list[str] = []
    for f in files:
        found = file_problems(f)  # benchmark and golden files; None for a suite
        if found is not None:
            problems.extend(found)
            continue
        try:
            load([f])
        except ConfigError as exc:
            problems.extend(exc.problems)
    return problems


def kind_of(data) -> str:
    from workflow.benchfile.parse import looks_like_file
    from workflow.regression.goldens import KIND

    if isinstance(data, dict) and data.get("kind") == KIND:
        return "goldens"
    if looks_like_file(data):
        return "benchmark"
    return "suite"


def file_problems(path: str | Path) -> list[str] | None:
    """Problems of a benchmark or golden file ('file: key: expected'); None for a suite."""
    path = Path(path)
    if path.suffix != ".json" or not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deeply
        return None  # the suite loader reports it, with its line
    kind = kind_of(data)
    if kind == "goldens":
        from workflow.regression.goldens import problems_of

        return problems_of(data, str(path))
    if kind == "benchmark":
        from workflow.benchfile.parse import load_file

        try:
            load_file(path)
        except ConfigError as exc:
            return exc.problems
        return []
    return None
