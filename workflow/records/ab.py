"""results/ab.json: the interleaved A/B comparisons, one row per SKU pair and workload
(workflow/schemas/ab.schema.json)."""

from __future__ import annotations

from workflow.records import schemas

# 1.1: IREE rows say their rounds' invocation settings (`invocation`), every row what
# would decide it when inconclusive (`to_decide`); optional, added alike without a bump
# (issue 25): IREE rows' `kernels` and `attribution`.
SCHEMA_VERSION = "1.1"


def validate_ab(doc: dict) -> None:
    """Raises jsonschema.ValidationError naming the first field that is wrong: written
    only when valid, so a bug of ours fails the job instead of leaving a bad file."""
    schemas.validator(schemas.load("ab")).validate(doc)
