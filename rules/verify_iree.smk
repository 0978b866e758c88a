# verify-iree: iree.runtime on the saved inputs vs the fp32 eager reference.
from workflow.paths import (
    COMPILE_META,
    COMPILE_VMFB,
    EXPORT_INPUTS,
    EXPORT_META,
    EXPORT_REFERENCE,
    IREE_BASELINE_VERIFY_ACCURACY,
    VERIFY_IREE_LOG,
)
from workflow.stages.resources import file_bytes, mem_request_mb, verify_runtime_min


rule verify_iree:
    input:
        vmfb=COMPILE_VMFB,
        compile_meta=COMPILE_META,
        export_meta=EXPORT_META,
        inputs=EXPORT_INPUTS,
        reference=EXPORT_REFERENCE,
    output:
        accuracy=IREE_BASELINE_VERIFY_ACCURACY,
    params:
        device=lambda wc: SUITE.sku(wc.sku)["iree"]["device"],
        tolerances=SUITE.config["accuracy"],
        runtime_version=IREE_RUNTIME_VERSION,
    log:
        VERIFY_IREE_LOG,
    conda:
        "../envs/benchflow.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, input, attempt: mem_request_mb("verify", file_bytes(input.vmfb),
                                                         attempt),
        runtime=verify_runtime_min(SUITE.config["timeouts"]),
    script:
        "../scripts/verify_iree.py"
