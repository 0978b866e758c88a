# Adapter: Snakemake rule `report` -> workflow.report.aggregate.
from workflow.stages.report import aggregate

aggregate(
    list(snakemake.input.cases),
    snakemake.output.report,
    iree_batches=list(snakemake.input.iree),
    batch_dirs=list(snakemake.input.batches),
    golden_files=list(snakemake.input.goldens),
    gate=snakemake.params.gate,
    unsupported=snakemake.params.unsupported,
    skipped=snakemake.params.skipped,
    suite_name=snakemake.params.suite_name,
    config_hash=snakemake.params.config_hash,
    config_source=snakemake.params.config_source,
)
