"""Benchmark (not a test): how long Snakemake takes to plan benchflow suites.

Prints the dry-run time of the default suite and of generated suites of 1,000 and
10,000 cases, and the time of a no-op rerun of the finished default suite (it is run
first in a scratch copy when --workdir has no finished report). Each figure is the
median of --repeat runs.

    python tests/perf/dag_overhead.py [--repeat 3] [--sizes 1000 10000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def snakemake(workdir: Path, *args: str) -> float:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
           str(workdir), "--cores", "2", "--quiet", "all", *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"snakemake failed:\n{proc.stdout}\n{proc.stderr}")
    return elapsed


def generated_suite(cases: int) -> dict:
    """`cases` linear cases: distinct [M, K, N] shapes over 4 SKUs."""
    skus = {f"sku{i}": {"iree": {"target_cpu": "generic"}} for i in range(4)}
    shapes = [[m, k, 64] for m in range(1, 10_000) for k in (32, 64, 128, 256)][: cases // 4]
    return {"skus": skus, "workloads": [{"model": "linear", "shapes": shapes}]}


def median_time(repeat: int, workdir: Path, *args: str) -> float:
    return statistics.median(snakemake(workdir, *args) for _ in range(repeat))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000])
    ap.add_argument("--workdir", type=Path, default=None,
                    help="a directory holding a finished default suite (default: run one)")
    args = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        empty = tmp / "empty"
        empty.mkdir()
        rows.append(("default suite, dry run", median_time(args.repeat, empty, "-n")))
        for n in args.sizes:
            path = tmp / f"suite{n}.yaml"
            path.write_text(yaml.safe_dump(generated_suite(n)))
            t = median_time(args.repeat, empty, "-n", "--configfile", str(path))
            rows.append((f"{n} cases, dry run", t))
        workdir = args.workdir
        if workdir is None or not (workdir / "results" / "report.json").exists():
            workdir = tmp / "default"
            workdir.mkdir()
            print("running the default suite once (a few minutes)...", file=sys.stderr)
            snakemake(workdir)
        rows.append(("default suite, no-op rerun", median_time(args.repeat, workdir)))
        shutil.rmtree(tmp / "default", ignore_errors=True)

    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  median of {args.repeat} (s)")
    for what, t in rows:
        print(f"{what:<{width}}  {t:8.2f}")


if __name__ == "__main__":
    main()
