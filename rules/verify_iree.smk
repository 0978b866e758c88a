# verify-iree: iree.runtime on the saved inputs vs the fp32 eager reference.
from workflow.paths import COMPILE_DIR, EXPORT_DIR, LOGS, VERIFY_DIR
from workflow.stages.resources import file_bytes, mem_request_mb, verify_runtime_min


rule verify_iree:
    input:
        vmfb=COMPILE_DIR + "/module.vmfb",
        compile_meta=COMPILE_DIR + "/compile.json",
        export_meta=EXPORT_DIR + "/export.json",
        inputs=EXPORT_DIR + "/inputs.npz",
        reference=EXPORT_DIR + "/reference.npz",
    output:
        accuracy=VERIFY_DIR.replace("{backend}", "iree").replace("{recipe}", "baseline")
        + "/accuracy.json",
    params:
        device=lambda wc: SUITE.sku(wc.sku)["iree"]["device"],
        tolerances=SUITE.config["accuracy"],
        runtime_version=IREE_RUNTIME_VERSION,
    log:
        LOGS + "/verify/{sku}/iree/{workload}.log",
    threads: 1
    resources:
        mem_mb=lambda wc, input, attempt: mem_request_mb("verify", file_bytes(input.vmfb),
                                                         attempt),
        runtime=verify_runtime_min(SUITE.config["timeouts"]),
    script:
        "../scripts/verify_iree.py"
