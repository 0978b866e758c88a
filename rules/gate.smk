# gate: results/gate.json exists only when the gate passed: every case judged against its
# goldens and none regressed. The job fails naming every regressed case, every case that
# could not be judged (inconclusive, failed, without a golden when goldens.require_goldens;
# goldens.allow_inconclusive counts inconclusive and no-golden cases as ok) and a
# goldens.dir that does not exist, so CI gates on `snakemake results/gate.json`.
# results/report.json never fails for a regression. (The golden files themselves are
# checked before any job, by the Snakefile, and so is a missing goldens.dir when the gate
# is among the run's targets.)
from workflow.paths import GATE, GATE_LOG, REPORT
from workflow.planning.resources import LOCAL_MEM_MB, LOCAL_RUNTIME_MIN

# With goldens.remeasure_budget_s the gate measures inconclusive IREE cases again: then it
# is a timing job (the bench slot and every core, see Snakefile), for that many seconds.
GATE_REMEASURE_S = SUITE.config["goldens"]["remeasure_budget_s"]


rule gate:
    input:
        report=REPORT,
    output:
        gate=GATE,
    params:
        # The gate's settings: changing them judges again (never measures again).
        goldens=SUITE.config["goldens"],
    log:
        GATE_LOG,
    conda:
        "../envs/benchflow.yaml"
    localrule: True
    threads: BENCH_THREADS if GATE_REMEASURE_S else 1
    resources:
        bench_slot=BENCH_SLOTS if GATE_REMEASURE_S else 0,
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN + int(GATE_REMEASURE_S // 60),
    script:
        "../scripts/gate.py"
