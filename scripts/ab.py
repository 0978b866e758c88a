# Adapter: Snakemake rule `ab` -> workflow.stages.ab.aggregate.
from workflow.stages.ab import aggregate

aggregate(
    list(snakemake.input.rows),
    snakemake.output.ab,
    suite_name=snakemake.params.suite_name,
    config_hash=snakemake.params.config_hash,
    repair=snakemake.params.repair,
)
