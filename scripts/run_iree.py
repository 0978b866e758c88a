# Adapter: Snakemake rule `run_iree` -> workflow.stages.run_iree.
from workflow.stages.iree import run_iree

run_iree(
    sku=snakemake.config["skus"][snakemake.wildcards.sku],
    timeout=snakemake.config["timeouts"]["run_s"],
    log=snakemake.log[0],
    **dict(snakemake.input.items()),
    **dict(snakemake.output.items()),
)
