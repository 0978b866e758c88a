"""`benchflow validate` on files that are not suites: benchmark files and golden files.

Kinds are told apart by content, not by name, so that a file can live anywhere: golden
files carry `"kind": "benchflow-goldens"`; a JSON object with `function_run`, `inputs`
or a `golden_*` object is a sharktank-format benchmark file; anything else is a suite.
"""

from __future__ import annotations

import json
from pathlib import Path

from workflow.errors import ConfigError

BENCHMARK_MARKERS = ("function_run", "inputs", "golden_time_ms", "golden_dispatch",
                     "golden_size", "benchmark_flags")


def kind_of(data) -> str:
    from workflow.regression.goldens import KIND

    if isinstance(data, dict) and data.get("kind") == KIND:
        return "goldens"
    if isinstance(data, dict) and any(k in data for k in BENCHMARK_MARKERS):
        return "benchmark"
    return "suite"


def file_problems(path: str | Path) -> list[str] | None:
    """Problems of a benchmark or golden file ('file: key: expected'); None for a suite."""
    path = Path(path)
    if path.suffix != ".json" or not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None  # the suite loader reports it, with its line
    kind = kind_of(data)
    if kind == "goldens":
        from workflow.regression.goldens import problems_of

        return problems_of(data, str(path))
    if kind == "benchmark":
        from workflow.suite.sharktank import load_file

        try:
            load_file(path)
        except ConfigError as exc:
            return exc.problems
        return []
    return None
