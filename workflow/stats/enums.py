"""The case record's statuses and golden verdicts, one enum each, made from the enum lists
of the record's one definition, workflow/schemas/report.schema.json (DESIGN.md, "The case
record"); and an A/B pair's verdict, from ab.schema.json.

StrEnums: a member equals its string and is written as it, so records read from JSON
compare equal to them and records written with them stay byte-identical. Member names
are the values in upper case, `-` as `_` (Status.COMPILE_ONLY, Verdict.NO_GOLDEN).

They live here, the lowest layer that compares them (verdict.judge reads a case's
status), so that imports go only downward: records, regression, render and stages use
these same enums. Reading the package's own schema file at import is the only thing in
stats that touches a file (through workflow.schemas.load, the one loader); every
function stays pure.
"""

from __future__ import annotations

from enum import StrEnum

from workflow.schemas import load


def _enum(name: str, values: list[str]) -> type[StrEnum]:
    return StrEnum(name, [(v.upper().replace("-", "_"), v) for v in values],
                   module=__name__)


_CASE = load("report")["$defs"]["case"]["properties"]
# ok | failed | unsupported | skipped | compile-only: the schema's `status` description.
Status = _enum("Status", _CASE["status"]["enum"])
# pass | regression | improvement | inconclusive | no-golden: golden.verdict's list (the
# dispatch and size verdicts are the same but inconclusive).
Verdict = _enum("Verdict", _CASE["golden"]["properties"]["verdict"]["enum"])
# An A/B pair's verdict (results/ab.json, ab.schema.json): regression | improvement |
# no-difference | inconclusive (stats/paired.py) | failed (a side did not compile or run).
ABVerdict = _enum("ABVerdict",
                  load("ab")["properties"]["pairs"]["items"]["properties"]["verdict"]["enum"])


def status_at(case: dict) -> str:
    """A case's status and the stage it ended at, as messages say it: `failed at compile`,
    or the status alone where no stage is recorded (a compile-only or skipped case ends at
    none): never `at None`."""
    stage = case.get("stage")
    return f"{case.get('status')} at {stage}" if stage else str(case.get("status"))
