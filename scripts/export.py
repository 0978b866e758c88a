# Adapter: Snakemake rule `export` -> workflow.stages.export.
from workflow.stages.iree import export

export(
    spec=snakemake.params.spec,
    timeout=snakemake.config["timeouts"]["export_s"],
    log=snakemake.log[0],
    **dict(snakemake.output.items()),
)
