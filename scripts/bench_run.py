# Adapter: Snakemake rule `run_bench_file` -> workflow.jobs.sharktank.run_benchmark_file.
from workflow.jobs.job import end_quietly_on_ctrl_c
from workflow.jobs.sharktank import run_benchmark_file

end_quietly_on_ctrl_c()

run_benchmark_file(
    vmfb=snakemake.input.vmfb,
    compile_meta=snakemake.input.compile_meta,
    modules=list(snakemake.input.modules),
    module_metas=list(snakemake.input.module_metas),
    spec=snakemake.params.spec,
    sku=snakemake.config["skus"][snakemake.wildcards.sku],
    timeout=snakemake.config["timeouts"]["run_s"],
    log=snakemake.log[0],
    timing=snakemake.output.timing,
)
