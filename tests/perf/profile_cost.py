"""Benchmark (not a test): what the profiling invocation of issue 25 costs against a case's
measuring time, the figure behind "adds at most 10 %" (docs/attribution.md,
"How profiles are taken").

Reads a finished run's case records (their `kernels.seconds`: IREE's profiling invocation
and iree-profile, or a torch case's profiled calls and key_averages, wall) and what their
measuring took (an IREE case's run stage JSON `measuring_s`: the first call and every
timed invocation; a torch case's share of its batch's timing passes, `seconds` in the
batch's batch.json, split evenly among its cases), and prints per profiled case both,
their ratio, and the median ratio. With --suite it first runs that suite's IREE cases
(its torch workloads too with --with-torch) in a temporary directory with Snakemake.

    python tests/perf/profile_cost.py --suite config/config.yaml [--with-torch] [--keep DIR]
    python tests/perf/profile_cost.py --results DIR   # a finished run's working directory
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from workflow.paths import IREE_BASELINE_RUN_TIMING
from workflow.records.storage import read_json

REPO = Path(__file__).resolve().parents[2]
GOAL = 0.10


def iree_only(suite: Path, out: Path, with_torch: bool = False) -> Path:
    """The suite with its torch workloads left out (the default backends are IREE's),
    or as it is with `with_torch`."""
    data = yaml.safe_load(suite.read_text())
    if with_torch:
        path = out / "suite.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path
    data["workloads"] = [w for w in data["workloads"]
                         if w.get("backends", data.get("backends", ["iree"])) == ["iree"]]
    data["backends"] = ["iree"]
    path = out / "suite.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_suite(suite: Path, workdir: Path, with_torch: bool = False) -> None:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory",
           str(workdir), "--cores", "2", "results/report.json",
           # Last: --configfile takes every argument after it.
           "--configfile", str(iree_only(suite, workdir, with_torch))]
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def rows(workdir: Path) -> list[tuple[str, float, float]]:
    """(case id, measuring s, profiling s) of every profiled IREE case of a finished run."""
    out = []
    for case in read_json(workdir / "results" / "report.json")["cases"]:
        kernels = case.get("kernels") or {}
        if case["backend"] != "iree" or kernels.get("source") != "iree-profile":
            continue
        run = read_json(workdir / IREE_BASELINE_RUN_TIMING.format(
            sku=case["sku"], workload=case["workload"]))
        out.append((case["id"], run["measuring_s"], kernels["seconds"]))
    return out + torch_rows(workdir)


def torch_rows(workdir: Path) -> list[tuple[str, float, float]]:
    """(case id, measuring s, profiling s) of every profiled torch case: its measuring,
    its batch's timing passes' seconds over the batch's cases (the passes time every case
    of the batch in turn)."""
    cases = {c["id"]: c for c in read_json(workdir / "results" / "report.json")["cases"]}
    out = []
    for batch in sorted((workdir / "results" / "torch").glob("**/batch.json")):
        data = read_json(batch)
        for case_id in data["cases"]:
            kernels = (cases.get(case_id) or {}).get("kernels") or {}
            if kernels.get("source") == "torch.profiler" and kernels.get("seconds"):
                out.append((case_id, data["seconds"] / len(data["cases"]),
                            kernels["seconds"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--suite", type=Path, help="run this suite's IREE cases first")
    where.add_argument("--results", type=Path, help="a finished run's working directory")
    ap.add_argument("--keep", type=Path, help="with --suite: run in DIR, and keep it")
    ap.add_argument("--with-torch", action="store_true",
                    help="with --suite: its torch workloads too")
    args = ap.parse_args()
    if args.suite:
        workdir = args.keep or Path(tempfile.mkdtemp(prefix="profile_cost."))
        workdir.mkdir(parents=True, exist_ok=True)
        run_suite(args.suite.resolve(), workdir, args.with_torch)
    else:
        workdir = args.results
    found = rows(workdir)
    if not found:
        sys.exit(f"{workdir}: no profiled case")
    print(f"{'case':58} {'measuring s':>11} {'profiling s':>11} {'ratio':>7}")
    for case_id, measuring, profiling in found:
        print(f"{case_id:58} {measuring:11.2f} {profiling:11.3f} {profiling / measuring:7.1%}")
    median = statistics.median(p / m for _, m, p in found)
    total = sum(p for *_, p in found) / sum(m for _, m, _ in found)
    print(f"median ratio {median:.1%}, all cases together {total:.1%} "
          f"(goal: at most {GOAL:.0%})")


if __name__ == "__main__":
    main()
