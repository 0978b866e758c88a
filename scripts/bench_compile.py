# Adapter: Snakemake rule `compile_bench_file` -> workflow.jobs.iree.compile_module.
from workflow.jobs.iree import compile_module
from workflow.jobs.job import end_quietly_on_ctrl_c

end_quietly_on_ctrl_c()

compile_module(
    mlir=snakemake.input.mlir,
    sku=snakemake.config["skus"][snakemake.wildcards.sku],
    flags=list(snakemake.params.flags),
    timeout=snakemake.config["timeouts"]["compile_s"],
    log=snakemake.log[0],
    **dict(snakemake.output.items()),
)
