# Adapter: Snakemake rule `run_torch` -> workflow.stages.torch.run_torch_batch.
from workflow.stages.job import end_quietly_on_ctrl_c
from workflow.stages.targets import time_targets
from workflow.stages.torch import run_torch_batch

end_quietly_on_ctrl_c()

run_torch_batch(
    cases=snakemake.params.cases,
    backends=snakemake.params.backends,
    sku=snakemake.params.sku,
    tolerances=snakemake.params.tolerances,
    timeout_per_case=snakemake.config["timeouts"]["run_s"],
    out_dir=snakemake.output.batch,
    log=snakemake.log[0],
    targets=time_targets([c["id"] for c in snakemake.params.cases], snakemake.wildcards.sku,
                         snakemake.params.sku["measurement"], snakemake.config["goldens"]),
)
