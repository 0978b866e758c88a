"""The one argv that starts this repository's Snakefile: `benchflow run`
(commands/single_run.py), `check`'s and `ab`'s gate (gating/gates.py) and `benchmarks
--run` (jobs/sharktank.py) all start snakemake so.

A module of its own, in planning, so that jobs and gating need not import commands.
Imports paths only.
"""

from __future__ import annotations

import sys


def snakemake_command(*options: str) -> list[str]:
    """The argv that runs this repository's Snakefile with `options` (in their order:
    --configfile takes every word after it up to the next option), in this interpreter;
    `benchflow run`, `ab` and `benchmarks --run` all start snakemake so."""
    from workflow.paths import REPO_ROOT

    return [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"), *options]
