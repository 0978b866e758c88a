# run-iree: iree-benchmark-module, one fresh process per invocation (DESIGN.md protocol).
from workflow.paths import COMPILE_DIR, EXPORT_DIR, LOGS, RUN_DIR
from workflow.stages.resources import file_bytes, mem_request_mb, run_runtime_min


rule run_iree:
    input:
        vmfb=COMPILE_DIR + "/module.vmfb",
        compile_meta=COMPILE_DIR + "/compile.json",
        export_meta=EXPORT_DIR + "/export.json",
        inputs=EXPORT_DIR + "/inputs.npz",
    output:
        timing=RUN_DIR.replace("{backend}", "iree").replace("{recipe}", "baseline")
        + "/timing.json",
    params:
        measurement=lambda wc: SUITE.sku(wc.sku)["measurement"],
        device=lambda wc: SUITE.sku(wc.sku)["iree"]["device"],
        topology=lambda wc: SUITE.sku(wc.sku)["iree"]["task_topology_max_group_count"],
        runtime_version=IREE_RUNTIME_VERSION,
    log:
        LOGS + "/run/{sku}/iree/{workload}.log",
    # Timing jobs never overlap each other nor any other job (see Snakefile).
    resources:
        bench_slot=1,
        mem_mb=lambda wc, input, attempt: mem_request_mb("run", file_bytes(input.vmfb), attempt),
        runtime=lambda wc: run_runtime_min(SUITE.sku(wc.sku)["measurement"],
                                           SUITE.config["timeouts"]),
    threads: BENCH_THREADS
    script:
        "../scripts/run_iree.py"
