# gate: results/gate.json exists only when no case regressed against its goldens; the
# job fails naming every regressed case otherwise, so CI gates on
# `snakemake results/gate.json`. results/report.json never fails for a regression.
# (The golden files themselves are checked before any job, by the Snakefile.)
from workflow.paths import GATE, GATE_LOG, REPORT
from workflow.stages.resources import LOCAL_MEM_MB, LOCAL_RUNTIME_MIN


rule gate:
    input:
        report=REPORT,
    output:
        gate=GATE,
    log:
        GATE_LOG,
    conda:
        "../envs/benchflow.yaml"
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/gate.py"
