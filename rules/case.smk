# case: one JSON record per case from its stage outputs (DESIGN.md's case record).
from workflow.paths import CASE, COMPILE_DIR, EXPORT_DIR, LOGS, RUN_DIR, VERIFY_DIR


rule case_iree:
    input:
        export=EXPORT_DIR + "/export.json",
        compiled=COMPILE_DIR + "/compile.json",
        run=RUN_DIR.replace("{backend}", "iree") + "/timing.json",
        verify=VERIFY_DIR.replace("{backend}", "iree") + "/accuracy.json",
    output:
        case=CASE.replace("{backend}", "iree"),
    params:
        identity=lambda wc: SUITE.case(wc.sku, "iree", wc.workload, wc.recipe).identity(),
        sku=lambda wc: SUITE.sku(wc.sku),
    log:
        LOGS + "/cases/{sku}/iree/{workload}/{recipe}.log",
    localrule: True
    script:
        "../scripts/case_iree.py"
