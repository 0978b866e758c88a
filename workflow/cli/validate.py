"""`benchflow validate`: checks files without running anything, collecting every problem."""

from __future__ import annotations

from pathlib import Path

from workflow.errors import ConfigError
from workflow.suite.load import load


def validate_files(files: list[str | Path]) -> list[str]:
    from workflow.cli.filekinds import file_problems

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
