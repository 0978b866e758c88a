# Adapter: Snakemake rule `run_torch` -> workflow.jobs.torch.run_torch_batch.
import sys

from workflow.jobs.job import end_quietly_on_ctrl_c
from workflow.jobs.torch import printable_line, run_torch_batch
from workflow.planning.slot_plan import on_gpu, timing_slot
from workflow.planning.targets import time_targets

end_quietly_on_ctrl_c()

# Held until the batch ends, pinned to its GPU and CPUs (workflow/slots).
with timing_slot(snakemake.config, on_gpu(snakemake.params.sku,
                                          [c["workload"] for c in snakemake.params.cases])):
    run_torch_batch(
        cases=snakemake.params.cases,
        backends=snakemake.params.backends,
        sku=snakemake.params.sku,
        tolerances=snakemake.params.tolerances,
        timeout_per_case=snakemake.config["timeouts"]["run_s"],
        compile_budget_s=snakemake.config["timeouts"]["torch_compile_s"],
        content=snakemake.params.content,
        out_dir=snakemake.output.batch,
        log=snakemake.log[0],
        targets=time_targets([c["id"] for c in snakemake.params.cases], snakemake.wildcards.sku,
                             snakemake.params.sku["measurement"], snakemake.config["goldens"]),
        # A line per case as the batch finishes it, on the job's stderr (the terminal of a
        # local run, the job's output file on a cluster): a batch of hours is not silent.
        say=lambda line: print(printable_line(line), file=sys.stderr, flush=True),
    )
