"""Benchmark (not a test): what one eager torch case that times about 2 s costs in a batch,
split by phase, and what it would cost with another worker start (a GPU's).

Measures a batch of --cases torch-eager linear cases (one thread), each with
ceil(--timed-s / --block-s) invocations whose blocks run at least --block-s seconds
(blocked_autorange; its `timed_s` is what they took), in one worker
(jobs/torch.run_torch_batch, as a run_torch job does, Snakemake left out), and prints
per case its own seconds (total_s without the worker's start: build, accuracy, first
call, profile, warm-up, timed, graph) and the batch's worker start. Then the
projection: per case = own + start / cases, for the start measured here and for
--gpu-start seconds (the H100's 9.5 s, docs/gpu.md), for batches of 1 to 64 cases.

    .venv/bin/python tests/perf/eager_case_cost.py [--cases 6] [--timed-s 2]
                                                    [--block-s 0.5] [--gpu-start 9.5]

Measured at 7b641ff on the 2-core machine under load about 7 (other work): 6 cases,
worker start 3.2 s; per case timed 5.8 s, warm-up 1.6 s, the rest of the invocations
(forks) 0.5 s, characterization (accuracy, profile, graph, build) 0.1 s; with a 9.5 s
start a case costs its own 8.0 s + 1.9 s in a batch of 5, + 0.3 s in a batch of 32.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=6)
    ap.add_argument("--timed-s", type=float, default=2.0)
    ap.add_argument("--block-s", type=float, default=0.5)
    ap.add_argument("--gpu-start", type=float, default=9.5)
    args = ap.parse_args()
    from tests.conftest import tiny_suite, write_suite
    from workflow.jobs.torch import run_torch_batch
    from workflow.planning.plan import torch_batch_plan
    from workflow.suite.load import load

    n = max(1, math.ceil(args.timed_s / args.block_s))
    measurement = {"invocations": n, "max_invocations": n, "torch_min_run_time_s": args.block_s,
                   "disturbed_share": 1.0}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = tiny_suite(workloads=[{"model": "linear", "shapes": [
            [256 + 32 * i, 256, 256] for i in range(args.cases)]}], backends=["torch-eager"])
        cfg["skus"] = {"host": {"torch": {"threads": 1}, "measurement": measurement}}
        suite = load([write_suite(Path(tmp) / "s.yaml", cfg)])
        cases = torch_batch_plan(suite, "host", "b0")
        t0 = time.monotonic()
        records = run_torch_batch(
            cases=cases, backends=suite.config["torch_backends"], sku=suite.sku("host"),
            tolerances=suite.config["accuracy"], timeout_per_case=600,
            out_dir=str(Path(tmp) / "b0"), log=str(Path(tmp) / "log"))
        wall = time.monotonic() - t0
    costs = [r["cost"] for r in records]
    start = sum((c.get("worker_start_s") or 0.0) for c in costs)
    own = [c["total_s"] - (c.get("worker_start_s") or 0.0) for c in costs]
    print(f"{len(records)} eager cases, {n} invocations of {args.block_s:g} s each; batch wall "
          f"{wall:.1f} s; worker start {start:.2f} s")
    for phase in ("timed_s", "warmup_s", "invocations_s", "accuracy_s", "profile_s",
                  "graph_s", "build_s", "first_call_s"):
        values = [c.get(phase) or 0.0 for c in costs]
        print(f"  {phase:14s} per case median {statistics.median(values):6.2f} s")
    own_s = statistics.median(own)
    print(f"  own (total_s without the start) per case median {own_s:.2f} s "
          f"(min {min(own):.2f}, max {max(own):.2f})")
    print("projection, per case = own + start / cases in the batch:")
    for k in (1, 5, 8, 16, 32, 64):
        print(f"  {k:3d} cases: {own_s + start / k:6.2f} s with this start, "
              f"{own_s + args.gpu_start / k:6.2f} s with a {args.gpu_start:g} s start")


if __name__ == "__main__":
    main()
