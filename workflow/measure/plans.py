"""The sequential plans of the protocol, built from a suite's settings."""

from __future__ import annotations

from workflow.stats.sequential import Plan


def invocation_plan(m: dict) -> Plan:
    """The plan of a SKU's adaptive invocations (measurement.invocations ..
    max_invocations, at the SKU's alpha)."""
    return Plan(min_rounds=m["invocations"], max_rounds=m["max_invocations"],
                alpha=m["alpha"], target_rel_width=m["target_rel_width"])


def ab_plan(ab: dict) -> Plan:
    """The suite's `ab` settings as a sequential plan of rounds."""
    return Plan(min_rounds=ab["min_rounds"], max_rounds=ab["max_rounds"], alpha=ab["alpha"],
                target_rel_width=ab["target_rel_width"], margin=ab["margin"])
