# Adapter: Snakemake rule `ab` -> workflow.comparisons.ab.aggregate.
from workflow.comparisons.ab import aggregate
from workflow.jobs.job import end_quietly_on_ctrl_c

end_quietly_on_ctrl_c()

aggregate(
    list(snakemake.input.rows),
    snakemake.output.ab,
    suite_name=snakemake.params.suite_name,
    config_hash=snakemake.params.config_hash,
    repair=snakemake.params.repair,
)
