# run-torch: a batch of torch cases of one SKU, every backend (eager, torch.compile) and
# recipe, in one worker: each case built and characterized once, then interleaved
# invocations (backends/torch/worker.py).
from workflow.paths import TORCH_BATCH_DIR, TORCH_BATCH_LOG, torch_batch_dir
from workflow.planning.keys import without_placement
from workflow.planning.plan import (
    batch_repair,
    torch_batch_backends,
    torch_batch_content,
    torch_batch_plan,
)
from workflow.planning.placement import (
    slurm_constraint,
    slurm_cpus_per_gpu,
    slurm_gres,
    slurm_partition,
    slurm_timing_extra,
)
from workflow.planning.resources import (
    earlier_record,
    torch_batch_mem_mb,
    torch_batch_runtime_min,
)


rule run_torch:
    output:
        batch=directory(TORCH_BATCH_DIR),
    params:
        cases=lambda wc: torch_batch_plan(SUITE, wc.sku, wc.batch),
        backends=lambda wc: torch_batch_backends(SUITE, wc.sku, wc.batch),
        # Its cluster placement left out: moving it to another partition reruns nothing.
        sku=lambda wc: without_placement(SUITE.sku(wc.sku)),
        tolerances=SUITE.config["accuracy"],
        # By content (planning/keys.py): the model sources, the recipes' code, the torch and
        # torchao builds of the SKU's interpreter (its own torch.python included).
        content=lambda wc: torch_batch_content(SUITE, wc.sku, wc.batch),
        # Set by the Snakefile when a case record no longer verifies (planning/plan.py's
        # verify_batches): the batch reruns once.
        repair=lambda wc: batch_repair(
            torch_batch_dir((wc.sku, wc.batch))),
    log:
        TORCH_BATCH_LOG,
    conda:
        "../envs/benchflow.yaml"
    # On its timing slot (see Snakefile): one GPU and its cores for a GPU SKU, the
    # whole machine for a CPU SKU unless the suite has cpu_slots.
    resources:
        bench_slot=lambda wc: min(BENCH_SLOTS, slots_needed(SUITE.config, TORCH_ON_GPU(wc))),
        # The batch's largest model, and every case's run_s in every pass.
        mem_mb=lambda wc, attempt: torch_batch_mem_mb(
            [c.workload for c in SUITE.torch_batch(wc.sku, wc.batch)],
            attempt),
        # What its cases are expected to take (earlier records where they exist),
        # capped by their timeouts; a retry asks for every timeout.
        runtime=lambda wc, attempt: torch_batch_runtime_min(
            SUITE.torch_batch(wc.sku, wc.batch),
            SUITE.sku(wc.sku)["measurement"], SUITE.config["timeouts"], attempt,
            [earlier_record(c) for c in SUITE.torch_batch(wc.sku, wc.batch)]),
        # The SKU's partition, node features and GPU (its `slurm` settings).
        slurm_partition=lambda wc: slurm_partition(SUITE.sku(wc.sku), SLURM_PARTITION),
        constraint=lambda wc: slurm_constraint(SUITE.sku(wc.sku)),
        gres=lambda wc: slurm_gres(SUITE.sku(wc.sku)),
        # A GPU SKU's job shares its node, with its own GPU and CPUs; a CPU SKU's (or
        # one with slurm.exclusive) holds a node (profiles/slurm; docs/cluster.md).
        slurm_extra=lambda wc: slurm_timing_extra(SUITE.sku(wc.sku)),
        cpus_per_gpu=lambda wc: slurm_cpus_per_gpu(SUITE.sku(wc.sku)),
    threads: lambda wc: timing_threads(SUITE.config, TORCH_ON_GPU(wc))
    script:
        "../scripts/run_torch.py"
