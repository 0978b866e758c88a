"""What the golden gate can tell, and so how precisely a case needs measuring: the
smallest slowdown it would flag (gate_mde), and the interval width a case measures
towards (DESIGN.md, "Measurement protocol"): what it will be judged by.
A case with a golden time is judged by the golden gate, whose
question is whether it moved past the tolerance: an interval half the tolerance's band
wide answers it (tolerance 1.10: 5 %), so a narrower target would buy precision nobody
reads. Every other case measures towards the SKU's measurement.target_rel_width.

The golden file is read when the batch runs and is no part of any key: blessing does not
measure anything again, and a case measured before it had a golden keeps its (narrower)
interval.
"""

from __future__ import annotations

import os

from workflow.measure.protocol import with_target_width
from workflow.regression.goldens import golden_path, read

GOLDEN_SOURCE = "goldens.tolerance"
SKU_SOURCE = "measurement.target_rel_width"


def time_targets(case_ids: list[str], sku: str, measurement: dict,
                 goldens: dict) -> dict[str, dict]:
    """case id -> {rel_width, source} for the cases a golden time judges, where half its
    tolerance's band is wider than the SKU's target (the others keep the SKU's)."""
    path = golden_path(goldens["dir"], sku)
    if not os.path.lexists(path):
        return {}
    entries = read(path, sku)["cases"]
    out = {}
    for cid in case_ids:
        entry = entries.get(cid)
        if not entry or entry.get("median_ms") is None:
            continue
        width = ((entry.get("tolerance") or goldens["tolerance"]) - 1) / 2
        if width > measurement["target_rel_width"]:
            out[cid] = {"rel_width": width, "source": GOLDEN_SOURCE}
    return out


def with_target(sku: dict, target: dict | None) -> dict:
    """The SKU with its measurement's target_rel_width replaced by a case's target."""
    if not target:
        return sku
    return {**sku, "measurement": with_target_width(sku["measurement"], target)}


def gate_mde(cv: float, n: int, gate: dict | None) -> float | None:
    """The smallest slowdown the golden gate would flag with 80 % power against a golden
    of as many invocations with this CV; None without gate settings or when no ratio
    can be flagged (too few invocations for the test to reach its p threshold)."""
    import math

    from workflow.stats.paired import mde_two_sample

    if gate is None:
        return None
    mde = mde_two_sample(cv, n, n, alpha=gate["p_value"], power=0.8,
                         tolerance=gate["tolerance"])
    return mde if math.isfinite(mde) else None
