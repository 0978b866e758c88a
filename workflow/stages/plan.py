"""What the Snakefile needs at load time: the validated suite, or a clean refusal."""

from __future__ import annotations

import sys
from importlib import metadata

from workflow.errors import ConfigError
from workflow.suite.load import Suite, load
from workflow.suite.schema import DEFAULT_CONFIG


def load_suite_or_exit(cli_configfiles, cli_overrides) -> Suite:
    """Loads the suite named by --configfile (default config/config.yaml) plus --config
    overrides. A bad suite prints every problem (file, key path, expectation) and
    exits before any job is scheduled, without a traceback."""
    paths = [str(p) for p in cli_configfiles] or [str(DEFAULT_CONFIG)]
    # The files are read here, not taken from Snakemake's merged `config`, so that
    # errors name the file they come from.
    try:
        return load(paths, dict(cli_overrides or {}))
    except ConfigError as exc:
        _refuse("invalid suite", exc.problems)


def _refuse(what: str, problems: list[str]) -> None:
    print(f"benchflow: {what}, no job was run:", file=sys.stderr)
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    sys.exit(1)


def check_goldens_or_exit(suite: Suite) -> None:
    """A broken golden file refuses the run before any job, like a broken suite."""
    from workflow.regression.goldens import check_dir

    problems = check_dir(suite.config["goldens"]["dir"], suite.config["skus"])
    if problems:
        _refuse("invalid golden files", problems)


def torch_golden_inputs(suite: Suite) -> list[str]:
    """Golden files of the SKUs with torch cases: the report step judges those cases
    (cheap) instead of their batch jobs, so blessing goldens never re-measures."""
    from workflow.regression.gate import golden_input

    skus = sorted({key[0] for key in suite.torch_batches})
    return [g for sku in skus for g in golden_input(suite.config["goldens"]["dir"], sku)]


def torch_batch_plan(suite: Suite, sku: str, backend: str, recipe: str, batch: str) -> list:
    """What a run_torch job measures; also its params, so a changed case reruns its batch."""
    return [{"id": c.id, "identity": c.identity(), "workload": c.workload.spec(),
             "recipe": c.recipe} for c in suite.torch_batch(sku, backend, recipe, batch)]


def unsupported_plan(suite: Suite) -> list[dict]:
    """Cases known unsupported while planning, recorded by the report step."""
    return [{"identity": c.identity(), "reason": c.unsupported} for c in suite.unsupported_cases]


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not-installed"
