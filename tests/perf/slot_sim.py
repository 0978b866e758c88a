"""Simulation (not a test): wall time of a suite's torch batches on one node with 1
timing slot against N (one per GPU), from measured per-case figures.

Plans the suite (default: torchao's published dashboard file, its H100 sweep) as
benchflow does, so the batches and their cases are the real ones; each batch costs one
worker start plus its cases, each case a cost drawn uniformly between the two figures
given (seeded). Batches go to the first free slot in plan order, as Snakemake starts a
job whenever a bench_slot unit is free. The figures are inputs: docs/gpu.md keeps what
an H100 measured (a torch case 3.7 to 15.5 s, a worker start 9.5 s).

A number given to --batch-size is the size rule alone (the batches every machine cut
before they were spread over the slots); `auto` is what the plan cuts now for each slot
count: the suite's own torch_batch_size spread over the slots (suite/batches.py), so
that every slot has a batch of at least 16 cases.

    python tests/perf/slot_sim.py --case-s 3.7 15.5 --start-s 9.5 [--slots 1 8]
        [--batch-size auto 64 16] [--suite FILE]
"""

from __future__ import annotations

import argparse
import heapq
import random
from pathlib import Path

from workflow.suite.load import batch_torch_cases, load, torch_skus

REPO = Path(__file__).resolve().parents[2]
H100_FILE = (REPO / "tests" / "data" / "upstream" / "torchao" / "published"
             / "dbef6992fb6b.dashboard.microbenchmark_quantization_config.yml")


def batch_costs(suite_file: str, batch_size: str, slots: int, case_s, start_s: float,
                seed: int):
    """Each batch of the plan: its key, cases and cost. `batch_size` "auto": the suite's
    batches spread over `slots`, as planning/slot_plan.spread_over_slots cuts them."""
    if batch_size == "auto":
        suite = load([suite_file])
        batch_torch_cases(suite, {sku: slots for sku in torch_skus(suite)})
    else:
        suite = load([suite_file], {"torch_batch_size": int(batch_size)})
    rng = random.Random(seed)
    return [(key, len(cases), start_s + sum(rng.uniform(*case_s) for _ in cases))
            for key, cases in sorted(suite.torch_batches.items())]


def makespan(costs: list[float], slots: int) -> tuple[float, list[int]]:
    """Wall time of list scheduling onto `slots`, and how many batches each slot ran."""
    free = [(0.0, i) for i in range(slots)]
    ran = [0] * slots
    for cost in costs:
        at, slot = heapq.heappop(free)
        ran[slot] += 1
        heapq.heappush(free, (at + cost, slot))
    return max(at for at, _ in free), ran


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default=str(H100_FILE))
    ap.add_argument("--case-s", type=float, nargs=2, required=True, metavar=("LO", "HI"))
    ap.add_argument("--start-s", type=float, required=True, help="a worker's start, s")
    ap.add_argument("--slots", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--batch-size", nargs="+", default=["auto", "64", "16"],
                    help="auto, or a torch_batch_size (the size rule alone)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for size in args.batch_size:
        if size != "auto" and not size.isdigit():
            ap.error(f"--batch-size: expected auto or a whole number, got {size!r}")
        line = [f"torch_batch_size {size}:"]
        for slots in args.slots:
            batches = batch_costs(args.suite, size, slots, args.case_s, args.start_s,
                                  args.seed)
            sizes = sorted(n for _, n, _ in batches)
            wall, ran = makespan([c for _, _, c in batches], slots)
            line.append(f"{slots} slot(s): {sum(sizes)} cases in {len(batches)} batches "
                        f"of {sizes[0]}-{sizes[-1]}, {wall / 60:.1f} min (batches per slot "
                        f"{ran});")
        print(" ".join(line))


if __name__ == "__main__":
    main()
