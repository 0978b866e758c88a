"""`benchflow validate`'s work (cli/validate.py prints what `check_file` returns):
every problem of suite, benchmark, golden, report and results files, without running
anything. A suite is checked as a run checks it before its first job (planning/plan.py's
own steps): the suite, the benchmark files it selects, its golden files.

Kinds are told apart by content, not by name, so that a file can live anywhere: golden
files carry `"kind": "benchflow-goldens"`, `benchflow run -o` results files
`"kind": "benchflow-results"` (or are a Forge results list); an object with
`schema_version` and `cases` and no kind is a report; a JSON object with `function_run`,
`inputs` or a `golden_*` object is a sharktank-format benchmark file (unless a `type` of
benchmark, quality or compstat and `markers` make it an iree-test-suites torch_models
test file; `mlir` and `compiler_flags` a torch_models module file); anything else is a
suite.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from workflow.errors import ConfigError
from workflow.files import read_bytes
from workflow.records.storage import MAX_JSON_BYTES

# What `benchflow validate` calls each kind of file when it is valid.
KINDS = {"goldens": "a benchflow goldens file", "benchmark": "a sharktank-format benchmark file",
         "torch_test": "an iree-test-suites torch_models test file",
         "torch_module": "an iree-test-suites torch_models module file",
         "report": "a benchflow report", "results": "a `benchflow run -o` results file",
         "suite": "a benchflow suite", "json": "a JSON file"}


class Checked(NamedTuple):
    kind: str             # a key of KINDS
    problems: list[str]   # each naming the file and key path; [] when it is valid
    # What only some runs refuse (a goldens.dir missing refuses a run asking for the gate):
    # the file is valid, and the user is told.
    warnings: tuple[str, ...] = ()


def check_file(path: str | Path) -> Checked:
    """What `path` is and every problem of it."""
    found = file_problems(path)  # JSON files other than suites; None for a suite
    return found if found is not None else suite_checked(path)


def suite_checked(path: str | Path) -> Checked:
    """Every problem a run of the suite at `path` would refuse it for before its first
    job, by the run's own steps (the Snakefile's): the suite, then the benchmark files it
    selects (their schema and confinement), then its golden files. As warnings, what a
    run asking for the gate (results/gate.json) would be refused for besides: a
    goldens.dir that does not exist while cases need it. A run without the gate takes
    such a suite (before the first `benchflow bless`)."""
    from workflow.planning.plan import (
        Refused,
        attach_benchmark_files,
        check_goldens,
        gate_goldens_problems,
        load_suite,
    )

    try:
        suite = load_suite([path], {})
        bench = attach_benchmark_files(suite)
        check_goldens(suite)
    except Refused as refusal:
        return Checked("suite", refusal.problems)
    return Checked("suite", [], tuple(gate_goldens_problems(suite, bench)))


def kind_of(data) -> str:
    from workflow.benchfile.formats import looks_like_file, looks_like_module, looks_like_test
    from workflow.records import results_file
    from workflow.regression.goldens import KIND

    if isinstance(data, dict) and data.get("kind") == KIND:
        return "goldens"
    if (isinstance(data, dict) and data.get("kind") == results_file.KIND) \
            or (results_file.is_forge_results(data) and data):
        return "results"
    if isinstance(data, dict) and "kind" not in data and {"schema_version", "cases"} <= set(data):
        return "report"
    # Before sharktank's: a torch_models test has `inputs` too.
    if looks_like_test(data):
        return "torch_test"
    if looks_like_module(data):
        return "torch_module"
    if looks_like_file(data):
        return "benchmark"
    return "suite"


def file_problems(path: str | Path) -> Checked | None:
    """A JSON file's kind and problems ('file: key: expected'); None for a suite."""
    path = Path(path)
    if path.suffix != ".json" or not path.exists():
        return None
    try:
        # Never blocks: a FIFO, a device or a directory is refused unread (files.py).
        data = json.loads(read_bytes(path, cap=MAX_JSON_BYTES, what="a JSON file"))
    except ConfigError as exc:
        return Checked("json", exc.problems)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deeply
        return None  # the suite loader reports it, with its line
    kind = kind_of(data)
    if kind == "goldens":
        from workflow.regression.goldens import problems_of

        return Checked(kind, problems_of(data, str(path)))
    if kind in ("benchmark", "torch_test", "torch_module", "report", "results"):
        from workflow.benchfile.parse import load_file
        from workflow.benchfile.torch_models import load_module, load_test
        from workflow.records.report import read_report

        # Read as the commands that take it read it: `run` a benchmark file, `compare`,
        # `check` and `bless` a report, `coverage` a results file.
        read = {"benchmark": load_file, "torch_test": load_test, "torch_module": load_module,
                "report": read_report,
                "results": lambda p: read_report(p, results_files=True)}[kind]
        try:
            read(path)
        except ConfigError as exc:
            return Checked(kind, exc.problems)
        return Checked(kind, [])
    return None
