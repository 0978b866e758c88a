"""Benchmark (not a test): Snakemake scheduling overhead of batched torch cases.

Runs a generated suite of N torch-eager cases (tiny linear shapes, one invocation,
short timers) and prints the wall time of the whole snakemake run, the time spent
inside the torch jobs (measurement, including worker start-up and characterization),
and their ratio. Then the same for a smaller suite with torch_batch_size 1 (one
Snakemake job per case), for contrast.

    python tests/perf/torch_batching.py [--cases 1000] [--batch-size 64] [--unbatched 60]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def suite(cases: int, batch_size: int) -> dict:
    shapes = [[m, k, 16] for m in range(1, 1000) for k in (8, 16, 32, 64)][:cases]
    return {
        "suite_name": f"batching-{cases}",
        "torch_batch_size": batch_size,
        "skus": {"host": {"torch": {"threads": 1}, "measurement": {
            "invocations": 1, "rerun_noisy": False, "torch_warmup_calls": 2,
            "torch_warmup_s": 0.0, "torch_min_run_time_s": 0.01}}},
        "workloads": [{"model": "linear", "shapes": shapes, "backends": ["torch-eager"]}],
    }


def run(cases: int, batch_size: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "suite.yaml").write_text(yaml.safe_dump(suite(cases, batch_size)))
        cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
               str(tmp), "--cores", "2", "results/report.json",
               "--configfile", str(tmp / "suite.yaml"), "--quiet", "all"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.exit(f"snakemake failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        batches = list((tmp / "results" / "torch").rglob("batch.json"))
        inside = sum(json.loads(p.read_text())["seconds"] for p in batches)
        report = json.loads((tmp / "results" / "report.json").read_text())
        ok = sum(c["status"] == "ok" for c in report["cases"])
    return {"cases": cases, "ok": ok, "jobs": len(batches), "wall_s": wall,
            "in_jobs_s": inside, "overhead_s": wall - inside,
            "overhead_ratio": (wall - inside) / inside}


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--unbatched", type=int, default=60,
                    help="cases of the contrast run with one job per case (0 to skip)")
    args = ap.parse_args()
    rows = [run(args.cases, args.batch_size)]
    if args.unbatched:
        rows.append(run(args.unbatched, 1))
    print(f"{'cases':>6} {'ok':>6} {'jobs':>5} {'wall s':>8} {'in jobs s':>9} "
          f"{'overhead s':>10} {'overhead/measurement':>21}")
    for r in rows:
        print(f"{r['cases']:>6} {r['ok']:>6} {r['jobs']:>5} {r['wall_s']:>8.1f} "
              f"{r['in_jobs_s']:>9.1f} {r['overhead_s']:>10.1f} {r['overhead_ratio']:>20.1%}")


if __name__ == "__main__":
    main()
