"""The report step: every case record -> results/report.json, validated before writing."""

from __future__ import annotations

from pathlib import Path

from workflow.records.case import skipped_case, unsupported_case
from workflow.records.report import build_report, validate_report
from workflow.records.storage import read_json, write_json
from workflow.regression.gate import golden_section
from workflow.stats.speedup import fill_speedups


def collect_cases(case_paths: list[str], batch_dirs: list[str], unsupported: list[dict],
                  golden_files: list[str] = (), gate: dict | None = None,
                  skipped: list[dict] = (), iree_batches: list[str] = ()) -> list[dict]:
    """Case records from the IREE batch jobs' lists and torch batch directories (both judged
    here against their SKU's golden file, so that blessing never re-measures), the
    benchmark files' case files (judged in their own case step), and the cases known
    unsupported or skipped while planning (recorded with their reasons, never dropped)."""
    by_sku = {Path(g).stem: g for g in golden_files}

    def judged(case: dict) -> dict:
        if gate is not None:
            case["golden"] = golden_section(case, by_sku.get(case["sku"]), gate)
        return case

    cases = [judged(read_json(c["case"])) for b in iree_batches for c in read_json(b)["cases"]]
    cases += [read_json(p) for p in case_paths]
    for d in batch_dirs:
        cases += [judged(read_json(p)) for p in sorted(Path(d, "cases").glob("*.json"))]
    cases += [unsupported_case(u["identity"], u["reason"]).to_dict() for u in unsupported]
    cases += [skipped_case(u["identity"], u["reason"], u.get("provenance")).to_dict()
              for u in skipped]
    fill_speedups(cases)
    return cases


def aggregate(case_paths: list[str], out: str, *, iree_batches: list[str] = (),
              batch_dirs: list[str] = (), unsupported: list[dict] = (),
              golden_files: list[str] = (), gate: dict | None = None,
              skipped: list[dict] = (), **kwargs) -> dict:
    cases = collect_cases(case_paths, list(batch_dirs), list(unsupported), list(golden_files),
                          gate, list(skipped), list(iree_batches))
    report = build_report(cases, **kwargs)
    validate_report(report)
    write_json(out, report)
    return report
