# Adapter: Snakemake rule `verify_iree` -> workflow.stages.verify_iree.
from workflow.stages.iree import verify_iree

verify_iree(
    sku=snakemake.config["skus"][snakemake.wildcards.sku],
    tolerances=snakemake.params.tolerances,
    timeout=snakemake.config["timeouts"]["verify_s"],
    log=snakemake.log[0],
    **dict(snakemake.input.items()),
    **dict(snakemake.output.items()),
)
