"""The sequential plans of the protocol, built from a suite's settings."""

from __future__ import annotations

from workflow.stats.sequential import Plan

# A case's adaptive invocations stop at a look once the interval, projected to
# max_invocations, would still be more than this many times the target width: on a
# loaded machine the target is out of reach, and the budget would buy little (the
# interval so far holds at its level; stop_reason width-out-of-reach says why it is wide).
OUT_OF_REACH = 1.5


def invocation_plan(m: dict) -> Plan:
    """The plan of a SKU's adaptive invocations (measurement.invocations ..
    max_invocations, at the SKU's alpha)."""
    return Plan(min_rounds=m["invocations"], max_rounds=m["max_invocations"],
                alpha=m["alpha"], target_rel_width=m["target_rel_width"],
                out_of_reach=OUT_OF_REACH)


def ab_plan(ab: dict) -> Plan:
    """The suite's `ab` settings as a sequential plan of rounds."""
    return Plan(min_rounds=ab["min_rounds"], max_rounds=ab["max_rounds"], alpha=ab["alpha"],
                target_rel_width=ab["target_rel_width"], margin=ab["margin"])
