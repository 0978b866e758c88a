# Adapter: Snakemake rule `iree_batch` -> workflow.jobs.iree_batch.batch_job.
from workflow.jobs.iree_batch import batch_job
from workflow.jobs.job import end_quietly_on_ctrl_c
from workflow.planning.slot_plan import on_gpu, timing_slot
from workflow.planning.targets import time_targets

end_quietly_on_ctrl_c()

# Held until the batch ends, pinned to its GPU and CPUs (workflow/slots).
with timing_slot(snakemake.config, on_gpu(snakemake.config["skus"][snakemake.wildcards.sku])):
    batch_job(
        cases=snakemake.params.cases,
        sku=snakemake.config["skus"][snakemake.wildcards.sku],
        tolerances=snakemake.params.tolerances,
        timeouts=snakemake.params.timeouts,
        content=snakemake.params.content,
        gate=snakemake.config["goldens"],
        batch=snakemake.output.batch,
        log=snakemake.log[0],
        threads=snakemake.threads,
        targets=time_targets([c["identity"]["id"] for c in snakemake.params.cases],
                             snakemake.wildcards.sku,
                             snakemake.config["skus"][snakemake.wildcards.sku]["measurement"],
                             snakemake.config["goldens"]),
    )
