"""Target paths of every stage; the rules and the suite expansion share them."""

from __future__ import annotations

from pathlib import Path

# The checkout that holds the Snakefile, config/ and benchmarks/ (workflow/ is in it).
REPO_ROOT = Path(__file__).resolve().parent.parent

RESULTS = "results"
LOGS = "logs"

EXPORT_DIR = RESULTS + "/export/{workload}"
COMPILE_DIR = RESULTS + "/compile/{sku}/{workload}"
RUN_DIR = RESULTS + "/run/{sku}/{backend}/{workload}/{recipe}"
VERIFY_DIR = RESULTS + "/verify/{sku}/{backend}/{workload}/{recipe}"
CASE = RESULTS + "/cases/{sku}/{backend}/{workload}/{recipe}.json"
TORCH_BATCH_DIR = RESULTS + "/torch/{sku}/{backend}/{recipe}/{batch}"
REPORT = RESULTS + "/report.json"
GATE = RESULTS + "/gate.json"
# Rendered from REPORT (workflow.render); PEAK is the machine's measured matmul peak.
REPORT_MD = RESULTS + "/report.md"
REPORT_CSV = RESULTS + "/report.csv"
DASHBOARD = RESULTS + "/dashboard.json"
REPORT_HTML = RESULTS + "/report.html"
PEAK = RESULTS + "/peak.json"


def case_path(case) -> str:
    return CASE.format(sku=case.sku, backend=case.backend, workload=case.workload.id,
                       recipe=case.recipe)


def torch_batch_dir(key: tuple[str, str, str, str]) -> str:
    sku, backend, recipe, batch = key
    return TORCH_BATCH_DIR.format(sku=sku, backend=backend, recipe=recipe, batch=batch)
