# compile: iree-compile with the SKU's flags -> .vmfb, dispatch count, binary size, seconds.
from workflow.backends.iree.tools import compile_flags
from workflow.paths import COMPILE_LOG, COMPILE_META, COMPILE_VMFB, EXPORT_META, EXPORT_MLIR
from workflow.stages.resources import compile_runtime_min, file_bytes, mem_request_mb


rule compile_iree:
    input:
        mlir=EXPORT_MLIR,
        export_meta=EXPORT_META,
    output:
        vmfb=COMPILE_VMFB,
        meta=COMPILE_META,
    params:
        # Only this SKU's flags: changing them reruns only this SKU's compiles.
        flags=lambda wc: compile_flags(SUITE.sku(wc.sku)),
        compiler_version=IREE_COMPILER_VERSION,
    log:
        COMPILE_LOG,
    conda:
        "../envs/benchflow.yaml"
    threads: 1
    # Memory from the weights inlined in the MLIR (its size, known once exported).
    resources:
        mem_mb=lambda wc, input, attempt: mem_request_mb("compile", file_bytes(input.mlir),
                                                         attempt),
        runtime=compile_runtime_min(SUITE.config["timeouts"]),
    script:
        "../scripts/compile_iree.py"
