# Adapter: Snakemake rule `ab_pair` -> workflow.stages.ab.compare_pair.
from workflow.stages.ab import compare_pair

compare_pair(
    base=snakemake.wildcards.base,
    new=snakemake.wildcards.new,
    workload=snakemake.wildcards.workload,
    skus=snakemake.config["skus"],
    ab=snakemake.params.ab,
    timeout=snakemake.config["timeouts"]["run_s"],
    out=snakemake.output.row,
    log=snakemake.log[0],
)
