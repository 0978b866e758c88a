"""benchflow: benchmark ML models and layers across model x config x dtype x SKU x backend x recipe.

The package holds all logic; the Snakefile, rules and scripts only wire it up: they
import only the stage rooms (planning, jobs, comparisons, baselines, gating,
commands) and workflow.paths, and what a rule needs of a lower package a stage room
provides (jobs/sharktank.py: a benchmark file's compile flags, run spec and data
files). A rule says what is built from what, a stage room how (tests/test_layout.py).
It is imported with `from workflow.x import y` inside Snakemake files, where the
global name `workflow` is Snakemake's own object.
"""

__version__ = "0.1.0"
