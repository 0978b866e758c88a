# render: results/report.json -> the reports people read (workflow.render), one rule per
# format, each rebuilt only when the report (or the measured peak) changes. Every output
# is wrapped in report() so that `snakemake --report report.zip` shows it with a caption.
# One adapter, scripts/render.py, runs them all: it calls the function of
# workflow.commands.render that has the rule's name.
from workflow.paths import (
    AB,
    DASHBOARD,
    PEAK,
    REPORT,
    REPORT_CSV,
    REPORT_HTML,
    REPORT_MD,
    render_log,
)
from workflow.planning.plan import peak_input
from workflow.planning.resources import LOCAL_MEM_MB, LOCAL_RUNTIME_MIN

RENDER_CATEGORY = "Reports"


# The machine's f32 matmul peak, the 100% of percent-of-peak figures. A measurement like
# any timing job: it holds the bench slot and every core, so it never runs beside one.
# An input of the renders only when the suite times a case on the CPU (peak_input).
rule measure_peak:
    output:
        peak=PEAK,
    log:
        render_log("peak"),
    conda:
        "../envs/benchflow.yaml"
    threads: BENCH_THREADS
    resources:
        bench_slot=BENCH_SLOTS,
        mem_mb=1024,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/render.py"


rule render_markdown:
    input:
        report=REPORT,
        # The A/B section, when the suite declares pairs.
        ab=[AB] if SUITE.has_ab else [],
    output:
        md=report(REPORT_MD, caption="../report/markdown.rst", category=RENDER_CATEGORY,
                  labels={"format": "Markdown", "content": "coverage table"}),
    log:
        render_log("markdown"),
    conda:
        "../envs/benchflow.yaml"
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/render.py"


rule render_csv:
    input:
        report=REPORT,
        peak=peak_input(SUITE),
    output:
        csv=report(REPORT_CSV, caption="../report/csv.rst", category=RENDER_CATEGORY,
                   labels={"format": "CSV", "content": "one row per case"}),
    log:
        render_log("csv"),
    conda:
        "../envs/benchflow.yaml"
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/render.py"


rule render_dashboard:
    input:
        report=REPORT,
        peak=peak_input(SUITE),
    output:
        dashboard=report(DASHBOARD, caption="../report/dashboard.rst",
                         category=RENDER_CATEGORY,
                         labels={"format": "JSON", "content": "OSS dashboard v3 records"}),
    log:
        render_log("dashboard"),
    conda:
        "../envs/benchflow.yaml"
    localrule: True
    threads: 1
    resources:
        mem_mb=LOCAL_MEM_MB,
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/render.py"


rule render_html:
    input:
        report=REPORT,
        peak=peak_input(SUITE),
        ab=[AB] if SUITE.has_ab else [],
    output:
        html=report(REPORT_HTML, caption="../report/html.rst", category=RENDER_CATEGORY,
                    labels={"format": "HTML", "content": "table and plots"}),
    params:
        # Each case links to its series in results/history.html, which `all` then builds.
        history_link=SUITE.config["history"]["ingest"],
    log:
        render_log("html"),
    conda:
        "../envs/benchflow.yaml"
    localrule: True
    threads: 1
    resources:
        mem_mb=1024,  # matplotlib figures
        runtime=LOCAL_RUNTIME_MIN,
    script:
        "../scripts/render.py"
