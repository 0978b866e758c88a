"""Benchmark (not a test): the default suite's timing with N CPU slots against 1.

Runs the suite (default: config/config.yaml) from scratch once per `cpu_slots` value,
each in a fresh work directory, and reads from Snakemake's own log when each timing job
(iree_batch, run_torch) started and finished: the span from the first timing job's
start to the last one's end, and the run's whole wall time.

    python tests/perf/slot_throughput.py [--slots 1 2] [--suite config/config.yaml]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TIMING = ("iree_batch", "run_torch")
STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ [\d:]{8} \d{4})\]$")


def timing_span(log: str) -> tuple[float, int]:
    """Seconds from the first timing job's start to the last one's end, and how many."""
    starts, ends, jobs, now = [], [], {}, None
    lines = log.splitlines()
    for i, line in enumerate(lines):
        stamp = STAMP.match(line.strip())
        if stamp:
            now = datetime.strptime(stamp[1], "%a %b %d %H:%M:%S %Y").timestamp()
            continue
        rule = re.match(r"^(?:local)?rule (\w+):", line.strip())
        if rule and rule[1] in TIMING and now is not None:
            jobid = next(re.search(r"jobid: (\d+)", x)[1] for x in lines[i:i + 8]
                         if "jobid:" in x)
            jobs[jobid] = now
            starts.append(now)
        done = re.match(r"^Finished jobid: (\d+)", line.strip())
        if done and done[1] in jobs and now is not None:
            ends.append(now)
    return (max(ends) - min(starts) if starts and ends else float("nan")), len(starts)


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--slots", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--suite", default=str(REPO / "config" / "config.yaml"))
    args = ap.parse_args()
    for slots in args.slots:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"),
                 # Snakemake's own log (not benchflow's progress logger) has the jobs'
                 # start and finish lines.
                 "--workflow-profile", "none",
                 "--directory", tmp, "--cores", "all", "all", "--configfile", args.suite,
                 "--config", f"cpu_slots={slots}"],
                capture_output=True, text=True)
            wall = time.monotonic() - t0
            span, jobs = timing_span(proc.stderr)
            print(f"cpu_slots={slots}: exit {proc.returncode}, whole run {wall:.0f} s, "
                  f"timing jobs {jobs} over {span:.0f} s (first start to last end)")
            if proc.returncode != 0:
                print(proc.stderr[-3000:])


if __name__ == "__main__":
    main()
