# case: one JSON record per case from its stage outputs (DESIGN.md's case record).
from workflow.regression.gate import golden_input
from workflow.paths import CASE, COMPILE_DIR, EXPORT_DIR, LOGS, RUN_DIR, VERIFY_DIR
from workflow.stages.resources import LOCAL_MEM_MB, LOCAL_RUNTIME_MIN


rule case_iree:
    input:
        export=EXPORT_DIR + "/export.json",
        compiled=COMPILE_DIR + "/compile.json",
        run=RUN_DIR.replace("{backend}", "iree") + "/timing.json",
        verify=VERIFY_DIR.replace("{backend}", "iree") + "/accuracy.json",
        # The SKU's golden file when it exists: blessing reruns the verdicts (gate.smk).
        goldens=lambda wc: golden_input(SUITE.config["goldens"]["dir"], wc.sku),
    output:
        case=CASE.replace("{backend}", "iree"),
    params:
        identity=lambda wc: SUITE.case(wc.sku, "iree", wc.workload, wc.recipe).identity(),
        sku=lambda wc: SUITE.sku(wc.sku),
        gate=SUITE.config["goldens"],
    log:
        LOGS + "/cases/{sku}/iree/{workload}/{recipe}.log",
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/case_iree.py"
