"""results/ab.json: the interleaved A/B comparisons, one row per SKU pair and workload
(workflow/schemas/ab.schema.json)."""

from __future__ import annotations

from workflow.records import schemas

SCHEMA_VERSION = "1.0"


def validate_ab(doc: dict) -> None:
    """Raises jsonschema.ValidationError naming the first field that is wrong: written
    only when valid, so a bug of ours fails the job instead of leaving a bad file."""
    schemas.validator(schemas.load("ab")).validate(doc)
