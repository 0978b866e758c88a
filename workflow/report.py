"""Aggregation: case records -> results/report.json, validated before it is written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import cache
from importlib import resources

import jsonschema

from workflow import provenance
from workflow.record import SCHEMA_VERSION
from workflow.storage import read_json, write_json


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


def aggregate(case_paths: list[str], out: str, **kwargs) -> dict:
    report = build_report([read_json(p) for p in case_paths], **kwargs)
    validate_report(report)
    write_json(out, report)
    return report
