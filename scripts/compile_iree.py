# Adapter: Snakemake rule `compile_iree` -> workflow.stages.compile_module.
from workflow.stages.iree import compile_module

compile_module(
    sku=snakemake.config["skus"][snakemake.wildcards.sku],
    timeout=snakemake.config["timeouts"]["compile_s"],
    log=snakemake.log[0],
    **dict(snakemake.input.items()),
    **dict(snakemake.output.items()),
)
