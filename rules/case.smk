# case: one JSON record per case from its stage outputs (DESIGN.md's case record).
from workflow.regression.gate import golden_input
from workflow.paths import (
    CASE_IREE_LOG,
    COMPILE_META,
    EXPORT_META,
    IREE_CASE,
    IREE_RUN_TIMING,
    IREE_VERIFY_ACCURACY,
)
from workflow.stages.resources import LOCAL_MEM_MB, LOCAL_RUNTIME_MIN


rule case_iree:
    input:
        export=EXPORT_META,
        compiled=COMPILE_META,
        run=IREE_RUN_TIMING,
        verify=IREE_VERIFY_ACCURACY,
        # The SKU's golden file when it exists: blessing reruns the verdicts (gate.smk).
        goldens=lambda wc: golden_input(SUITE.config["goldens"]["dir"], wc.sku),
    output:
        case=IREE_CASE,
    params:
        identity=lambda wc: SUITE.case(wc.sku, "iree", wc.workload, wc.recipe).identity(),
        sku=lambda wc: SUITE.sku(wc.sku),
        gate=SUITE.config["goldens"],
    log:
        CASE_IREE_LOG,
    conda:
        "../envs/benchflow.yaml"
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/case_iree.py"
