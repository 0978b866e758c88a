# report: every case record -> results/report.json (schema-validated before writing).
from workflow.suite.sharktank import case_paths as bench_case_paths
from workflow.paths import LOGS, REPORT
from workflow.stages.plan import torch_golden_inputs
from workflow.stages.resources import LOCAL_MEM_MB, LOCAL_RUNTIME_MIN


rule report:
    input:
        cases=[case_path(c) for c in SUITE.iree_cases] + bench_case_paths(SUITE),
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
        gate=SUITE.config["goldens"],
    log:
        LOGS + "/report.log",
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/report.py"
