# iree-batch: a batch of one SKU's IREE cases (workflow/jobs/iree_batch.py; each case by
# workflow/jobs/iree.py's case_job), each measured
# start to finish: export (shared by the workload's SKUs), iree-compile,
# iree-benchmark-module (one fresh process per invocation, DESIGN.md protocol),
# verification against the fp32 reference, case record.
import json
import os
import sys

from workflow.paths import IREE_BATCH, IREE_BATCH_LOG, iree_batch_path
from workflow.jobs.iree_batch import FORCED_ENV, forced_targets
from workflow.planning.keys import dtype_tolerances
from workflow.planning.plan import (
    batch_repair,
    iree_batch_content,
    iree_batch_plan,
    sku_settings,
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
    iree_batch_mem_mb,
    iree_batch_runtime_min,
)


# What this run forces (--forcerun, --forceall), for the batch jobs to read: a job that
# reruns because a member was damaged measures that member again, one that was forced
# measures every member (jobs/iree_batch.forced_by_command). Set only where the run is
# planned; a SLURM job's own snakemake inherits it.
if workflow.is_main_process:
    os.environ[FORCED_ENV] = json.dumps(forced_targets(sys.argv[1:]))


rule iree_batch:
    output:
        batch=IREE_BATCH,
    params:
        cases=lambda wc: iree_batch_plan(SUITE, wc.sku, wc.batch),
        # Only this SKU's settings: changing its flags reruns only this SKU's batches.
        sku=lambda wc: sku_settings(SUITE, wc.sku),
        # Per dtype only: IREE runs baseline, which the recipes' SQNR rules do not judge.
        tolerances=dtype_tolerances(SUITE.config["accuracy"]),
        # What the cases are made from, by content (planning/keys.py): the model source
        # files and the builds of torch, the FX importer and the SKU's IREE tools. An
        # edited model file reruns the batches of its cases, and `snakemake -n` prints
        # this dict before and now; the job re-measures only the cases it changed.
        content=lambda wc: iree_batch_content(SUITE, wc.sku, wc.batch),
        # A failed case is measured again when a timeout changes (jobs/iree.py); a
        # finished one is reused, its key has no timeouts.
        timeouts=SUITE.config["timeouts"],
        # Set by the Snakefile when a member's files no longer verify (planning/plan.py's
        # verify_batches): the batch reruns once and measures those members again.
        repair=lambda wc: batch_repair(iree_batch_path((wc.sku, wc.batch))),
    log:
        IREE_BATCH_LOG,
    conda:
        "../envs/benchflow.yaml"
    # The job times modules on its timing slot (see Snakefile): one GPU and its cores
    # for a GPU SKU, the whole machine for a CPU SKU unless the suite has cpu_slots.
    resources:
        bench_slot=lambda wc: min(BENCH_SLOTS, slots_needed(SUITE.config, IREE_ON_GPU(wc))),
        # Its exports made at once, one per thread (planning/resources.export_workers).
        mem_mb=lambda wc, attempt, threads: iree_batch_mem_mb(
            [c.workload for c in SUITE.iree_batches[(wc.sku, wc.batch)]], attempt, threads),
        # What its cases are expected to take (earlier records where they exist),
        # capped by their timeouts; a retry asks for every timeout.
        runtime=lambda wc, attempt: iree_batch_runtime_min(
            [c.workload for c in SUITE.iree_batches[(wc.sku, wc.batch)]],
            SUITE.sku(wc.sku)["measurement"], SUITE.config["timeouts"], attempt,
            [earlier_record(c) for c in SUITE.iree_batches[(wc.sku, wc.batch)]]),
        # The SKU's partition, node features and GPU (its `slurm` settings).
        slurm_partition=lambda wc: slurm_partition(SUITE.sku(wc.sku), SLURM_PARTITION),
        constraint=lambda wc: slurm_constraint(SUITE.sku(wc.sku)),
        gres=lambda wc: slurm_gres(SUITE.sku(wc.sku)),
        # A GPU SKU's job shares its node, with its own GPU and CPUs; a CPU SKU's (or
        # one with slurm.exclusive) holds a node (profiles/slurm; docs/cluster.md).
        slurm_extra=lambda wc: slurm_timing_extra(SUITE.sku(wc.sku)),
        cpus_per_gpu=lambda wc: slurm_cpus_per_gpu(SUITE.sku(wc.sku)),
    threads: lambda wc: timing_threads(SUITE.config, IREE_ON_GPU(wc))
    script:
        "../scripts/iree_batch.py"
