"""How a SKU's cases are cut into batch jobs (suite/load.py groups them per SKU and
kind): by a hash of the workload id, so that a suite's edit moves few cases between
jobs."""

from __future__ import annotations

import hashlib
import math

# The fewest cases a torch batch is cut to when batches are spread over timing slots
# (by_workload_hash): a worker's start is paid once per batch, 9.5 s on an H100 (3.2 s on
# the 2-core test machine), so at 16 cases or more it adds at most 0.6 s to each case,
# against the 5 s a case that times about 2 s may cost in all (the warm-up's 1.6 s and
# the timed 2 s leave about 1.4 s). Fewer, larger batches would leave slots idle; more,
# smaller ones would pay the start more often than they gain in parallel.
MIN_TORCH_BATCH_CASES = 16


def _digest(workload_id: str) -> int:
    return int.from_bytes(hashlib.sha256(workload_id.encode()).digest()[:8], "big")


def size_buckets(count: int, size: int) -> int:
    """The batches of the size rule: about count / size, a power of two."""
    return 1 << max(0, math.ceil(count / size) - 1).bit_length()


def by_workload_hash(cases: list, size: int, slots: int = 1,
                     minimum: int = MIN_TORCH_BATCH_CASES) -> list[tuple[str, list]]:
    """One SKU's cases in about count / size batches (a power of two), by a hash of the
    workload id, not by position: adding or removing a workload changes the members of
    one batch only (all of them when the count crosses a power of two; an IREE batch
    job then reuses every unchanged case's results, jobs/iree_batch.py, and a torch
    batch job every unchanged case that it or another batch of the SKU measured,
    jobs/torch_journal.py). Each batch keeps the cases' order.

    Where `slots` timing slots measure the SKU's batches at once and the size rule
    leaves some idle, the cases go into as many batches as slots instead, as long as
    each keeps `minimum` cases (spread)."""
    digests = [_digest(c.workload.id) for c in cases]
    buckets = size_buckets(len(cases), size)
    out: dict[str, list] = {}
    for case, digest in zip(cases, digests, strict=True):
        # Size 1: a job per workload, named by the hash itself (no two workloads share one).
        bucket = digest if size == 1 else digest % buckets
        out.setdefault(f"b{bucket}", []).append(case)
    # Counted as cut, not as buckets: a bucket no workload hashes to is no batch.
    spread_to = min(slots, len(cases) // minimum)
    if size > 1 and spread_to > len(out):
        return spread(cases, digests, spread_to, minimum)
    return list(out.items())


def spread(cases: list, digests: list[int], count: int, minimum: int) -> list[tuple[str, list]]:
    """The cases in `count` batches of about equal size, each of `minimum` cases or more:
    the workloads in the order of their hash, cut where the cases reach each count-th
    (a workload goes where its middle falls; a batch left under `minimum` joins the one
    before it). Buckets of the hash alone are uneven where workloads are few (torchao's
    H100 file: 24 workloads of 10 cases in 8 buckets of 20 to 60 cases), and the largest
    decides when the last slot is done. Adding or removing a workload shifts each cut by
    at most its share of a batch (its cases x count / all cases), so the workloads near a
    cut may move to the batch beside (removing one of the file's 24 workloads moved 0 to
    4 of the others); a torch batch reuses the moved cases' records
    (jobs/torch_journal.py), so a move costs a job that assembles them, not a measurement."""
    sizes: dict[int, int] = {}
    for d in digests:
        sizes[d] = sizes.get(d, 0) + 1
    batch_of, seen = {}, 0
    for d in sorted(sizes):
        batch_of[d] = min(count - 1, (2 * seen + sizes[d]) * count // (2 * len(cases)))
        seen += sizes[d]
    counts: dict[int, int] = {}
    for d, n in sizes.items():
        counts[batch_of[d]] = counts.get(batch_of[d], 0) + n
    # Each batch under `minimum` joins the nearest one before it (the first: after it).
    kept = sorted(counts)
    for b in sorted(counts):
        if counts[b] < minimum and len(kept) > 1:
            kept.remove(b)
            into = max((k for k in kept if k < b), default=min(kept))
            counts[into] += counts.pop(b)
            batch_of = {d: into if v == b else v for d, v in batch_of.items()}
    out: dict[str, list] = {}
    for case, digest in zip(cases, digests, strict=True):
        out.setdefault(f"b{batch_of[digest]}", []).append(case)
    return list(out.items())
