# export: torch.export -> MLIR (IREE FX importer), seeded inputs, fp32 reference, op stats.
from workflow.paths import EXPORT_DIR, LOGS


rule export:
    output:
        mlir=EXPORT_DIR + "/module.mlirbc",
        inputs=EXPORT_DIR + "/inputs.npz",
        reference=EXPORT_DIR + "/reference.npz",
        meta=EXPORT_DIR + "/export.json",
    params:
        spec=lambda wc: SUITE.workloads[wc.workload].spec(),
        torch_version=TORCH_VERSION,
        iree_compiler_version=IREE_COMPILER_VERSION,
    log:
        LOGS + "/export/{workload}.log",
    threads: 1
    script:
        "../scripts/export.py"
