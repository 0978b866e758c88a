# history: results/report.json -> the history store (the suite's history.path, an embedded
# ClickHouse, or history.url, a shared server), then results/history.html (every series
# in the store, change points marked) and results/history.json (the runs this job
# ingested, the change points found). An optional target (`snakemake results/history.html`),
# part of `all` when the suite sets history.ingest. Ingesting is idempotent (a run already
# in the store adds nothing), so running it again only renders again. The store itself is
# no output: it outlives every run, as goldens do. A regression found here never fails the
# job; `benchflow history detect` is the gate.
from workflow.paths import HISTORY_HTML, HISTORY_JSON, HISTORY_LOG, REPORT
from workflow.planning.plan import peak_input
from workflow.planning.resources import LOCAL_MEM_MB, LOCAL_RUNTIME_MIN


rule history:
    input:
        report=REPORT,
        # Read beside the report by the importer (percent of peak, as dashboard.json has
        # it): an input so that it is measured before, never after, the ingest.
        peak=peak_input(SUITE),
    output:
        html=HISTORY_HTML,
        summary=HISTORY_JSON,
    params:
        history=SUITE.config["history"],
    log:
        HISTORY_LOG,
    conda:
        "../envs/benchflow.yaml"
    localrule: True
    threads: 1
    resources:
        mem_mb=2048,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/history.py"
