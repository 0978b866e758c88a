# report: every case record -> results/report.json (schema-validated before writing).
from workflow.paths import LOGS, REPORT


rule report:
    input:
        cases=[case_path(c) for c in SUITE.cases],
    output:
        report=REPORT,
    params:
        suite_name=SUITE.config["suite_name"],
        config_hash=SUITE.config_hash(),
        config_source=SUITE.source,
    log:
        LOGS + "/report.log",
    localrule: True
    script:
        "../scripts/report.py"
