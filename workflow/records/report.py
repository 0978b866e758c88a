"""Aggregation: case records -> results/report.json, validated before it is written."""

from __future__ import annotations

from datetime import UTC, datetime

from workflow.records import provenance, schemas
from workflow.records.case import SCHEMA_VERSION


def report_schema() -> dict:
    return schemas.load("report")


def validate_report(report: dict) -> None:
    """Raises jsonschema.ValidationError naming the first offending path."""
    schemas.validator(report_schema()).validate(report)


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
