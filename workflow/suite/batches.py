"""How a SKU's cases are cut into batch jobs (suite/load.py groups them per SKU and
kind): by a hash of the workload id, so that a suite's edit moves few cases between
jobs."""

from __future__ import annotations

import hashlib
import math


def by_workload_hash(cases: list, size: int) -> list[tuple[str, list]]:
    """One SKU's cases in about count / size batches (a power of two), by a hash of the
    workload id, not by position: adding or removing a workload changes the members of
    one batch only (all of them when the count crosses a power of two; an IREE batch
    job then reuses every unchanged case's results, jobs/iree_batch.py). Each batch keeps
    the cases' order."""
    buckets = 1 << max(0, math.ceil(len(cases) / size) - 1).bit_length()
    out: dict[str, list] = {}
    for case in cases:
        digest = int.from_bytes(hashlib.sha256(case.workload.id.encode()).digest()[:8], "big")
        # Size 1: a job per workload, named by the hash itself (no two workloads share one).
        bucket = digest if size == 1 else digest % buckets
        out.setdefault(f"b{bucket}", []).append(case)
    return list(out.items())
