# Adapter: Snakemake rule `ab_torch_pair` -> workflow.comparisons.ab_torch.compare_torch_pair.
from workflow.comparisons.ab_torch import compare_torch_pair
from workflow.jobs.job import end_quietly_on_ctrl_c

end_quietly_on_ctrl_c()

compare_torch_pair(
    pair=snakemake.params.pair,
    ab=snakemake.params.ab,
    timeout=snakemake.config["timeouts"]["run_s"],
    out=snakemake.output.row,
    log=snakemake.log[0],
)
