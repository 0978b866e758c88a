# report: every case record -> results/report.json (schema-validated before writing).
from workflow.paths import REPORT, REPORT_LOG, iree_batch_path, torch_batch_dir
from workflow.stages.plan import (
    bench_case_paths,
    bench_skipped_plan,
    report_golden_inputs,
    unsupported_plan,
)
from workflow.stages.resources import LOCAL_MEM_MB, LOCAL_RUNTIME_MIN


rule report:
    input:
        # IREE and torch cases are judged here against the goldens, not in their
        # measuring jobs (see report_golden_inputs); the benchmark files' cases (BENCH,
        # selected by the Snakefile) in their own case step.
        iree=[iree_batch_path(key) for key in SUITE.iree_batches],
        batches=[torch_batch_dir(key) for key in SUITE.torch_batches],
        cases=bench_case_paths(BENCH),
        goldens=report_golden_inputs(SUITE),
    output:
        report=REPORT,
    params:
        suite_name=SUITE.config["suite_name"],
        config_hash=SUITE.config_hash(),
        config_source=SUITE.source,
        unsupported=unsupported_plan(SUITE),
        # Benchmark files that cannot run here: skipped cases, with their reasons.
        skipped=bench_skipped_plan(BENCH),
        gate=SUITE.config["goldens"],
    log:
        REPORT_LOG,
    conda:
        "../envs/benchflow.yaml"
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/report.py"
