# report: every case record -> results/report.json (schema-validated before writing).
from workflow.paths import REPORT, REPORT_LOG, torch_batch_dir
from workflow.stages.plan import (
    bench_skipped_plan,
    report_case_paths,
    torch_golden_inputs,
    unsupported_plan,
)
from workflow.stages.resources import LOCAL_MEM_MB, LOCAL_RUNTIME_MIN


rule report:
    input:
        # IREE cases, then the benchmark files' (BENCH, selected by the Snakefile).
        cases=report_case_paths(SUITE, BENCH),
        batches=[torch_batch_dir(key) for key in SUITE.torch_batches],
        # Torch cases are judged here, not in their batch job (see torch_golden_inputs).
        goldens=torch_golden_inputs(SUITE),
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
