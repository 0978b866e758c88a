# gate: results/gate.json exists only when no case regressed against its goldens; the
# job fails naming every regressed case otherwise, so CI gates on
# `snakemake results/gate.json`. results/report.json never fails for a regression.
from workflow.paths import GATE, LOGS, REPORT
from workflow.stages.resources import LOCAL_MEM_MB, LOCAL_RUNTIME_MIN
from workflow.stages.plan import check_goldens_or_exit

check_goldens_or_exit(SUITE)


rule gate:
    input:
        report=REPORT,
    output:
        gate=GATE,
    log:
        LOGS + "/gate.log",
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/gate.py"
