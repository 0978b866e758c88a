# Adapter: Snakemake rule `case_iree` -> workflow.stages.case_iree.
from workflow.stages.cases import case_iree

case_iree(
    identity=snakemake.params.identity,
    sku=snakemake.params.sku,
    gate=snakemake.params.gate,
    **dict(snakemake.input.items()),
    **dict(snakemake.output.items()),
)
