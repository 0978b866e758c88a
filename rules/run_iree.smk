# run-iree: iree-benchmark-module, one fresh process per invocation (DESIGN.md protocol).
from workflow.paths import (
    COMPILE_META,
    COMPILE_VMFB,
    EXPORT_INPUTS,
    EXPORT_META,
    IREE_BASELINE_RUN_TIMING,
    RUN_IREE_LOG,
)
from workflow.stages.resources import file_bytes, mem_request_mb, run_runtime_min


rule run_iree:
    input:
        vmfb=COMPILE_VMFB,
        compile_meta=COMPILE_META,
        export_meta=EXPORT_META,
        inputs=EXPORT_INPUTS,
    output:
        timing=IREE_BASELINE_RUN_TIMING,
    params:
        measurement=lambda wc: SUITE.sku(wc.sku)["measurement"],
        device=lambda wc: SUITE.sku(wc.sku)["iree"]["device"],
        topology=lambda wc: SUITE.sku(wc.sku)["iree"]["task_topology_max_group_count"],
        runtime_version=IREE_RUNTIME_VERSION,
    log:
        RUN_IREE_LOG,
    conda:
        "../envs/benchflow.yaml"
    # Timing jobs never overlap each other nor any other job (see Snakefile).
    resources:
        bench_slot=1,
        mem_mb=lambda wc, input, attempt: mem_request_mb("run", file_bytes(input.vmfb), attempt),
        runtime=lambda wc: run_runtime_min(SUITE.sku(wc.sku)["measurement"],
                                           SUITE.config["timeouts"]),
    threads: BENCH_THREADS
    script:
        "../scripts/run_iree.py"
