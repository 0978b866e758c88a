"""Aggregation: case records -> results/report.json, validated before it is written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import cache
from importlib import resources

import jsonschema

from workflow.records import provenance
from workflow.records.case import SCHEMA_VERSION
from workflow.records.storage import read_json, write_json
from workflow.stats.speedup import fill_speedups


@cache
def report_schema() -> dict:
    return json.loads(resources.files("workflow").joinpath("schemas/report.schema.json")
                      .read_text())


def validate_report(report: dict) -> None:
    """Raises jsonschema.ValidationError naming the first offending path."""
    jsonschema.Draft202012Validator(report_schema()).validate(report)


def build_report(cases: list[dict], *, suite_name: str, config_hash: str,
                 config_source: str, repo: str = ".") -> dict:
    starts = [c["provenance"].get("started_at") for c in cases if c["provenance"].get("started_at")]
    return {
        "schema_version": SCHEMA_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "provenance": {
            "suite_name": suite_name,
            "config_source": config_source,
            "config_hash": config_hash,
            "git_sha": provenance.git_sha(repo),
            "versions": provenance.versions(),
            "host": provenance.host(),
            "started_at": min(starts) if starts else None,
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        },
        "cases": sorted(cases, key=lambda c: c["id"]),
    }


def collect_cases(case_paths: list[str], batch_dirs: list[str], unsupported: list[dict],
                  golden_files: list[str] = (), gate: dict | None = None) -> list[dict]:
    """Case records from per-case files (IREE, with their verdicts), torch batch
    directories (judged here against their SKU's golden file), and the cases known
    unsupported while planning (recorded, never dropped)."""
    from pathlib import Path

    from workflow.records.case import unsupported_case

    cases = [read_json(p) for p in case_paths]
    by_sku = {Path(g).stem: g for g in golden_files}
    for d in batch_dirs:
        for p in sorted(Path(d, "cases").glob("*.json")):
            case = read_json(p)
            if gate is not None:
                from workflow.regression.gate import golden_section

                case["golden"] = golden_section(case, by_sku.get(case["sku"]), gate)
            cases.append(case)
    cases += [unsupported_case(u["identity"], u["reason"]).to_dict() for u in unsupported]
    fill_speedups(cases)
    return cases


def aggregate(case_paths: list[str], out: str, *, batch_dirs: list[str] = (),
              unsupported: list[dict] = (), golden_files: list[str] = (),
              gate: dict | None = None, **kwargs) -> dict:
    cases = collect_cases(case_paths, list(batch_dirs), list(unsupported), list(golden_files),
                          gate)
    report = build_report(cases, **kwargs)
    validate_report(report)
    write_json(out, report)
    return report
