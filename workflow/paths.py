"""Target paths of every stage; the rules and the suite expansion share them."""

from __future__ import annotations

RESULTS = "results"
LOGS = "logs"

EXPORT_DIR = RESULTS + "/export/{workload}"
COMPILE_DIR = RESULTS + "/compile/{sku}/{workload}"
RUN_DIR = RESULTS + "/run/{sku}/{backend}/{workload}/{recipe}"
VERIFY_DIR = RESULTS + "/verify/{sku}/{backend}/{workload}/{recipe}"
CASE = RESULTS + "/cases/{sku}/{backend}/{workload}/{recipe}.json"
REPORT = RESULTS + "/report.json"


def case_path(case) -> str:
    return CASE.format(sku=case.sku, backend=case.backend, workload=case.workload.id,
                       recipe=case.recipe)
