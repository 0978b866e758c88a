"""Benchmark (not a test): how long Snakemake takes to plan benchflow suites, side by
side with a trivial Snakefile of as many one-job cases, the floor Snakemake itself sets.

Prints, each the median of --repeat runs, measured one after the other in one run:
- the dry run of the default suite;
- the dry run of generated suites of --sizes IREE cases (one linear workload, distinct
  [M, K, N] shapes over 4 SKUs) and of the trivial Snakefile with as many cases
  (a rule writing one file per case, and `all` over them), and their ratio;
- the no-op rerun of a finished suite of --noop-size cases and of the trivial
  Snakefile finished likewise, and their ratio. "Finished" is made without measuring
  1,000 cases for hours: every output the dry run plans is created empty, then
  `snakemake --touch` marks them up to date in DAG order, the same for both Snakefiles
  (--touch records no job metadata, so neither rerun compares params: with about
  n / iree_batch_size IREE jobs, that is a few dozen comparisons spared on our side);
- the no-op rerun of the really finished default suite (run first in a scratch copy
  when --workdir has no finished report).

    python tests/perf/dag_overhead.py [--repeat 3] [--sizes 1000 10000] [--noop-size 1000]

The goals of issue 15: dry run of 10,000 IREE cases <= 1.5x the trivial one; no-op
rerun of a finished 1,000-case suite <= 2x the trivial one.
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

# One job per case, the floor: no params, no resources, no script, no conda.
TRIVIAL = """\
N = int(config["cases"])

rule all:
    input: expand("out/{i}.json", i=range(N))

rule case:
    output: "out/{i}.json"
    log: "logs/{i}.log"
    shell: "echo {wildcards.i} > {output}"
"""


def snakemake(snakefile: Path, workdir: Path, *args: str, check_noop: bool = False) -> float:
    # A no-op is checked by Snakemake's own words, which --quiet would hide.
    quiet = [] if check_noop else ["--quiet"]
    cmd = [sys.executable, "-m", "snakemake", "-s", str(snakefile), "--directory",
           str(workdir), "--cores", "2", *quiet, "all", *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"snakemake failed:\n{proc.stdout}\n{proc.stderr}")
    if check_noop and "Nothing to be done" not in proc.stdout + proc.stderr:
        sys.exit(f"not a no-op: {' '.join(cmd)}\n{proc.stdout[-3000:]}")
    return elapsed


def generated_suite(cases: int) -> dict:
    """`cases` linear cases: distinct [M, K, N] shapes over 4 SKUs."""
    skus = {f"sku{i}": {"iree": {"target_cpu": "generic"}} for i in range(4)}
    shapes = [[m, k, 64] for m in range(1, 10_000) for k in (32, 64, 128, 256)][: cases // 4]
    return {"skus": skus, "workloads": [{"model": "linear", "shapes": shapes}]}


def median_time(repeat: int, snakefile: Path, workdir: Path, *args: str, **kw) -> float:
    return statistics.median(snakemake(snakefile, workdir, *args, **kw) for _ in range(repeat))


def finish_without_running(snakefile: Path, workdir: Path, *args: str) -> None:
    """Creates every planned output empty, then lets `snakemake --touch` mark them up to
    date (metadata included), so that the next run has nothing to do."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(snakefile),
                           "--directory", str(workdir), "--cores", "2", "all", *args,
                           "--summary"], capture_output=True, text=True, check=True)
    for line in proc.stdout.splitlines()[1:]:
        path = workdir / line.split("\t", 1)[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    subprocess.run([sys.executable, "-m", "snakemake", "-s", str(snakefile), "--directory",
                    str(workdir), "--cores", "2", "--quiet", "all", *args, "--touch"],
                   capture_output=True, text=True, check=True)


def fingerprint_members(workdir: Path, suite: Path) -> int:
    """Gives every IREE batch of a touched suite the members file a real run leaves: the
    fingerprints of each case's record, MLIR, inputs, reference and module (small files),
    so that the no-op rerun pays the Snakefile's check of every finished case's files
    (planning/plan.verify_batches) as it would after a real run. Returns the files."""
    import os

    from workflow.jobs.iree import case_files
    from workflow.paths import iree_batch_path
    from workflow.planning.members import members_path
    from workflow.records.storage import fingerprint, write_json
    from workflow.suite.load import load

    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        files = 0
        for key, cases in load([str(suite)]).iree_batches.items():
            members = {}
            for c in cases:
                paths = case_files(c.identity()).values()
                for path in paths:
                    Path(path).parent.mkdir(parents=True, exist_ok=True)
                    if not Path(path).exists():
                        Path(path).write_text(path)
                members[c.id] = {"files": {path: fingerprint(path) for path in paths}}
                files += len(paths)
            write_json(members_path(iree_batch_path(key)), {"members": members})
        return files
    finally:
        os.chdir(cwd)


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000])
    ap.add_argument("--noop-size", type=int, default=1000)
    ap.add_argument("--workdir", type=Path, default=None,
                    help="a directory holding a finished default suite (default: run one)")
    args = ap.parse_args()
    ours = REPO / "Snakefile"

    rows: list[tuple[str, float, float | None]] = []  # what, ours, trivial
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trivial = tmp / "Snakefile.trivial"
        trivial.write_text(TRIVIAL)
        empty = tmp / "empty"
        empty.mkdir()
        rows.append(("default suite, dry run", median_time(args.repeat, ours, empty, "-n"),
                     None))
        for n in args.sizes:
            path = tmp / f"suite{n}.yaml"
            path.write_text(yaml.safe_dump(generated_suite(n)))
            t = median_time(args.repeat, ours, empty, "-n", "--configfile", str(path))
            ref = median_time(args.repeat, trivial, empty, "-n", "--config", f"cases={n}")
            rows.append((f"{n} cases, dry run", t, ref))

        n = args.noop_size
        path = tmp / f"noop{n}.yaml"
        path.write_text(yaml.safe_dump(generated_suite(n)))
        done, done_trivial = tmp / "done", tmp / "done-trivial"
        finish_without_running(ours, done, "--configfile", str(path))
        checked = fingerprint_members(done, path)
        print(f"no-op rerun: the Snakefile checks {checked} fingerprinted files",
              file=sys.stderr)
        finish_without_running(trivial, done_trivial, "--config", f"cases={n}")
        t = median_time(args.repeat, ours, done, "--configfile", str(path), check_noop=True)
        ref = median_time(args.repeat, trivial, done_trivial, "--config", f"cases={n}",
                          check_noop=True)
        rows.append((f"{n} cases, no-op rerun", t, ref))

        workdir = args.workdir
        if workdir is None or not (workdir / "results" / "report.json").exists():
            workdir = tmp / "default"
            workdir.mkdir()
            print("running the default suite once (a few minutes)...", file=sys.stderr)
            snakemake(ours, workdir)
        rows.append(("default suite, no-op rerun",
                     median_time(args.repeat, ours, workdir, check_noop=True), None))
        shutil.rmtree(tmp / "default", ignore_errors=True)

    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'benchflow (s)':>13}  {'trivial (s)':>11}  ratio   "
          f"(medians of {args.repeat})")
    for what, t, ref in rows:
        extra = f"{ref:11.2f}  {t / ref:5.2f}x" if ref else f"{'':11}  {'':6}"
        print(f"{what:<{width}}  {t:13.2f}  {extra}")


if __name__ == "__main__":
    main()
