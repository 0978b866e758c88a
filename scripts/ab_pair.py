# Adapter: Snakemake rule `ab_pair` -> workflow.comparisons.ab.compare_pair.
from workflow.comparisons.ab import compare_pair
from workflow.jobs.job import end_quietly_on_ctrl_c

end_quietly_on_ctrl_c()

compare_pair(
    base=snakemake.wildcards.base,
    new=snakemake.wildcards.new,
    workload=snakemake.wildcards.workload,
    skus=snakemake.config["skus"],
    spec=snakemake.params.pair["spec"],
    ab=snakemake.params.ab,
    timeouts=snakemake.params.timeouts,
    out=snakemake.output.row,
    log=snakemake.log[0],
)
