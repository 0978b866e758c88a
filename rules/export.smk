# export: torch.export -> MLIR (IREE FX importer), seeded inputs, fp32 reference, op stats.
from workflow.paths import EXPORT_INPUTS, EXPORT_LOG, EXPORT_META, EXPORT_MLIR, EXPORT_REFERENCE
from workflow.stages.resources import export_mem_mb, export_runtime_min


rule export:
    output:
        mlir=EXPORT_MLIR,
        inputs=EXPORT_INPUTS,
        reference=EXPORT_REFERENCE,
        meta=EXPORT_META,
    params:
        spec=lambda wc: SUITE.workloads[wc.workload].export_spec(),
        torch_version=TORCH_VERSION,
        iree_compiler_version=IREE_COMPILER_VERSION,
    log:
        EXPORT_LOG,
    conda:
        "../envs/benchflow.yaml"
    threads: 1
    # Memory from the model's estimated weights (workflow/resources.py); wall time
    # from the suite's export timeout, so a hung export is a recorded failure.
    resources:
        mem_mb=lambda wc, attempt: export_mem_mb(SUITE.workloads[wc.workload], attempt),
        runtime=export_runtime_min(SUITE.config["timeouts"]),
    script:
        "../scripts/export.py"
