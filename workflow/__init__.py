"""benchflow: benchmark ML models and layers across model x config x dtype x SKU x backend x recipe.

The package holds all logic; the Snakefile, rules and scripts only wire it up.
It is imported with `from workflow.x import y` inside Snakemake files, where the
global name `workflow` is Snakemake's own object.
"""

__version__ = "0.1.0"
