# gate: results/gate.json exists only when no case regressed against its goldens; the
# job fails naming every regressed case otherwise, so CI gates on
# `snakemake results/gate.json`. results/report.json never fails for a regression.
import sys

from workflow.goldens import check_dir
from workflow.paths import LOGS, REPORT
from workflow.resources import LOCAL_MEM_MB, LOCAL_RUNTIME_MIN

# A broken golden file refuses the suite before any job runs, like a broken suite.
_golden_problems = check_dir(SUITE.config["goldens"]["dir"], SUITE.config["skus"])
if _golden_problems:
    print("benchflow: invalid golden files, no job was run:", file=sys.stderr)
    for _p in _golden_problems:
        print(f"  {_p}", file=sys.stderr)
    sys.exit(1)


rule gate:
    input:
        report=REPORT,
    output:
        gate="results/gate.json",
    log:
        LOGS + "/gate.log",
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/gate.py"
