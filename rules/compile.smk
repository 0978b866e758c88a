# compile: iree-compile with the SKU's flags -> .vmfb, dispatch count, binary size, seconds.
from workflow.backends.iree.tools import compile_flags
from workflow.paths import COMPILE_DIR, EXPORT_DIR, LOGS
from workflow.stages.resources import compile_runtime_min, file_bytes, mem_request_mb


rule compile_iree:
    input:
        mlir=EXPORT_DIR + "/module.mlirbc",
        export_meta=EXPORT_DIR + "/export.json",
    output:
        vmfb=COMPILE_DIR + "/module.vmfb",
        meta=COMPILE_DIR + "/compile.json",
    params:
        # Only this SKU's flags: changing them reruns only this SKU's compiles.
        flags=lambda wc: compile_flags(SUITE.sku(wc.sku)),
        compiler_version=IREE_COMPILER_VERSION,
    log:
        LOGS + "/compile/{sku}/{workload}.log",
    threads: 1
    # Memory from the weights inlined in the MLIR (its size, known once exported).
    resources:
        mem_mb=lambda wc, input, attempt: mem_request_mb("compile", file_bytes(input.mlir),
                                                         attempt),
        runtime=compile_runtime_min(SUITE.config["timeouts"]),
    script:
        "../scripts/compile_iree.py"
