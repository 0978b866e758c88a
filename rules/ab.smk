# ab: interleaved A/B comparisons of SKU pairs (workflow/stages/ab.py): per workload the
# two SKUs' modules alternate, fresh invocation by invocation, in one job; then every
# row into results/ab.json.
from workflow.paths import AB, AB_LOG, AB_ROW, AB_ROW_LOG, ab_row_paths, iree_batch_path
from workflow.stages.plan import ab_batch_inputs, sku_settings
from workflow.stages.resources import LOCAL_MEM_MB, LOCAL_RUNTIME_MIN, ab_mem_mb, ab_runtime_min


rule ab_pair:
    input:
        # The IREE batch jobs that compile both SKUs' modules of the workload.
        batches=lambda wc: [iree_batch_path(k)
                            for k in ab_batch_inputs(SUITE, wc.base, wc.new, wc.workload)],
    output:
        row=AB_ROW,
    params:
        base=lambda wc: sku_settings(SUITE, wc.base),
        new=lambda wc: sku_settings(SUITE, wc.new),
        ab=SUITE.config["ab"],
        runtime_version=IREE_RUNTIME_VERSION,
    log:
        AB_ROW_LOG,
    conda:
        "../envs/benchflow.yaml"
    # A timing job: it runs alone (see Snakefile).
    resources:
        bench_slot=1,
        mem_mb=lambda wc, attempt: ab_mem_mb(SUITE.workloads[wc.workload], attempt),
        runtime=lambda wc: ab_runtime_min(SUITE.config["ab"], SUITE.config["timeouts"]),
    threads: BENCH_THREADS
    script:
        "../scripts/ab_pair.py"


rule ab:
    input:
        rows=ab_row_paths(SUITE.ab_pairs),
    output:
        ab=AB,
    params:
        suite_name=SUITE.config["suite_name"],
        config_hash=SUITE.config_hash(),
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
