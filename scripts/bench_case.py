# Adapter: Snakemake rule `case_bench_file` -> workflow.jobs.cases.case_benchmark_file.
from workflow.jobs.cases import case_benchmark_file
from workflow.jobs.job import end_quietly_on_ctrl_c

end_quietly_on_ctrl_c()

case_benchmark_file(
    identity=snakemake.params.identity,
    sku=snakemake.config["skus"][snakemake.wildcards.sku],
    compiled=snakemake.input.compiled,
    run=snakemake.input.run,
    goldens=snakemake.input.goldens,
    provenance=snakemake.params.provenance,
    file_goldens=snakemake.params.file_goldens,
    gate=snakemake.params.gate,
    case=snakemake.output.case,
)
