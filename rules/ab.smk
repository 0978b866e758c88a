# ab: interleaved A/B comparisons of SKU pairs (workflow/comparisons/ab.py): per workload the
# two SKUs' modules alternate, fresh invocation by invocation, in one job; then every
# row into results/ab.json. Torch pairs (workflow/comparisons/ab_torch.py): per pair of torch
# sides and workload, two long-lived workers alternate timed blocks in one job.
import sys

from workflow.paths import (
    AB,
    AB_LOG,
    AB_ROW,
    AB_ROW_LOG,
    AB_TORCH_ROW,
    AB_TORCH_ROW_LOG,
    ab_row_paths,
    torch_ab_row_paths,
)
from workflow.comparisons.ab import ab_repair
from workflow.planning.plan import ab_pair_plan, sku_settings, torch_ab_plan
from workflow.planning.placement import slurm_constraint, slurm_gres, slurm_partition
from workflow.planning.resources import (
    LOCAL_MEM_MB,
    LOCAL_RUNTIME_MIN,
    ab_mem_mb,
    ab_runtime_min,
    torch_ab_mem_mb,
)


# An ab.json that no longer holds its rows' records (edited by hand, cut, retyped: a row
# said no-difference where its record says regression) gets a new repair note, a param
# of `ab`, and is built again from the records before anything reads it (the gate, the
# renders). Checked only in the process that plans, as the batches' files are (Snakefile).
AB_REPAIR, _ab_damaged = ab_repair(
    AB, ab_row_paths(SUITE.ab_pairs) + torch_ab_row_paths(SUITE.torch_ab_pairs),
    check=workflow.is_main_process and SUITE.has_ab)
if _ab_damaged:
    print(_ab_damaged, file=sys.stderr)


rule ab_torch_pair:
    # No input files: a torch side builds its module itself. What decides the row is
    # in its params: both sides' cases, backends and SKU settings, and the content their
    # workers build from (model sources, recipes' code, torch builds).
    output:
        row=AB_TORCH_ROW,
    # Side labels join SKU, backend and recipe with "+" (suite/pairs.py), as the
    # workload of a pair of two workloads joins their ids.
    wildcard_constraints:
        base=r"[A-Za-z0-9_.+-]+",
        new=r"[A-Za-z0-9_.+-]+",
        workload=r"[A-Za-z0-9_.+-]+",
    params:
        pair=lambda wc: torch_ab_plan(SUITE, wc.base, wc.new, wc.workload),
        ab=SUITE.config["ab"],
    log:
        AB_TORCH_ROW_LOG,
    conda:
        "../envs/benchflow.yaml"
    # A timing job: it runs alone (see Snakefile).
    resources:
        bench_slot=BENCH_SLOTS,
        mem_mb=lambda wc, attempt: torch_ab_mem_mb(
            SUITE.torch_ab_pairs[(wc.base, wc.new, wc.workload)], attempt),
        runtime=lambda wc: ab_runtime_min(SUITE.config["ab"], SUITE.config["timeouts"]),
        # Placed as the base side's SKU (its `slurm` settings): one job runs both sides.
        slurm_partition=lambda wc: slurm_partition(
            SUITE.sku(SUITE.torch_ab_pairs[(wc.base, wc.new, wc.workload)].base.case.sku),
            SLURM_PARTITION),
        constraint=lambda wc: slurm_constraint(
            SUITE.sku(SUITE.torch_ab_pairs[(wc.base, wc.new, wc.workload)].base.case.sku)),
        gres=lambda wc: slurm_gres(
            SUITE.sku(SUITE.torch_ab_pairs[(wc.base, wc.new, wc.workload)].base.case.sku)),
    threads: BENCH_THREADS
    script:
        "../scripts/ab_torch_pair.py"


rule ab_pair:
    # No input files: the job needs no batch job (no full measurement of either SKU
    # first). It exports the workload through the shared, content-keyed export (reused
    # when a batch made it already), compiles both modules into its own files
    # (paths.AB_COMPILE_DIR) and measures only the rounds. What decides the row is in its
    # params: both SKUs' settings, the workload's export spec and the content both sides
    # are made from (model sources, tool builds), the ab settings and the timeouts.
    output:
        row=AB_ROW,
    params:
        base=lambda wc: sku_settings(SUITE, wc.base),
        new=lambda wc: sku_settings(SUITE, wc.new),
        pair=lambda wc: ab_pair_plan(SUITE, wc.base, wc.new, wc.workload),
        ab=SUITE.config["ab"],
        timeouts=SUITE.config["timeouts"],
        runtime_version=IREE_RUNTIME_VERSION,
    log:
        AB_ROW_LOG,
    conda:
        "../envs/benchflow.yaml"
    # A timing job: it runs alone (see Snakefile).
    resources:
        bench_slot=BENCH_SLOTS,
        mem_mb=lambda wc, attempt: ab_mem_mb(SUITE.workloads[wc.workload], attempt),
        runtime=lambda wc: ab_runtime_min(SUITE.config["ab"], SUITE.config["timeouts"]),
        # Placed as the base SKU (its `slurm` settings): one job runs both SKUs' modules.
        # The SKU's partition, node features and GPU (its `slurm` settings).
        slurm_partition=lambda wc: slurm_partition(SUITE.sku(wc.base), SLURM_PARTITION),
        constraint=lambda wc: slurm_constraint(SUITE.sku(wc.base)),
        gres=lambda wc: slurm_gres(SUITE.sku(wc.base)),
    threads: BENCH_THREADS
    script:
        "../scripts/ab_pair.py"


rule ab:
    input:
        rows=ab_row_paths(SUITE.ab_pairs) + torch_ab_row_paths(SUITE.torch_ab_pairs),
    output:
        ab=AB,
    params:
        suite_name=SUITE.config["suite_name"],
        config_hash=SUITE.config_hash(),
        repair=AB_REPAIR,
    log:
        AB_LOG,
    conda:
        "../envs/benchflow.yaml"
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/ab.py"
