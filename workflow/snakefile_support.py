"""What the Snakefile needs at load time: the validated suite, or a clean refusal."""

from __future__ import annotations

import sys
from importlib import metadata

from workflow.config import DEFAULT_CONFIG
from workflow.errors import ConfigError
from workflow.suite import Suite, load


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
        print("benchflow: invalid suite, no job was run:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        sys.exit(1)


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
