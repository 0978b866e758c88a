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
                  skipped: list[dict] = ()) -> list[dict]:
    """Case records from per-case files (IREE and benchmark files, judged in their case
    step), torch batch directories (judged here against their SKU's golden file, so
    that blessing never re-measures a batch), and the cases known unsupported or skipped
    while planning (recorded with their reasons, never dropped)."""
    cases = [read_json(p) for p in case_paths]
    by_sku = {Path(g).stem: g for g in golden_files}
    for d in batch_dirs:
        for p in sorted(Path(d, "cases").glob("*.json")):
            case = read_json(p)
            if gate is not None:
                case["golden"] = golden_section(case, by_sku.get(case["sku"]), gate)
            cases.append(case)
    cases += [unsupported_case(u["identity"], u["reason"]).to_dict() for u in unsupported]
    cases += [skipped_case(u["identity"], u["reason"], u.get("provenance")).to_dict()
              for u in skipped]
    fill_speedups(cases)
    return cases


def aggregate(case_paths: list[str], out: str, *, batch_dirs: list[str] = (),
              unsupported: list[dict] = (), golden_files: list[str] = (),
              gate: dict | None = None, skipped: list[dict] = (), **kwargs) -> dict:
    cases = collect_cases(case_paths, list(batch_dirs), list(unsupported), list(golden_files),
                          gate, list(skipped))
    report = build_report(cases, **kwargs)
    validate_report(report)
    write_json(out, report)
    return report
