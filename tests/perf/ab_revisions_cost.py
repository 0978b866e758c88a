"""Benchmark (not a test): what `benchflow ab --base --new` costs against one run of the
suite (the goal: the default suite with one model changed at most 1.5x one `make report`;
with nothing changed, seconds).

A git repository is made in a temporary directory: the default suite (config/config.yaml)
plus one model of its own (model_modules: models/widening.py, its workload on every SKU
and on the host SKU's torch-eager backend), committed on `main`; a branch `feature` widens
that model's second layer; a branch `notes` changes a notes file only. Measured, in this
order, on the same machine:

- one run of the suite at `main` in a fresh directory (`snakemake --cores 2 all`, what
  `make report` runs), cold;
- `benchflow ab --base main --new feature` with a fresh cache: only the widened model's
  cases are built and measured, the rest listed as unchanged;
- `benchflow ab --base main --new notes` with another fresh cache: nothing measured.

Printed: each wall time, the ratios against the suite's run, the A/B's verdict lines and
the load before each step.

    .venv/bin/python tests/perf/ab_revisions_cost.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO))

# The model tests/test_ab_revisions.py widens between two revisions.
from tests.test_ab_revisions import WIDENING  # noqa: E402


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(repo: Path) -> None:
    suite = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    suite["model_modules"] = ["models/widening.py"]
    suite["workloads"] += [{"model": "widening", "shapes": [[64, 256]]},
                           {"model": "widening", "shapes": [[64, 256]], "skus": ["cpu-host"],
                            "backends": ["torch-eager"]}]
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "perf@example.com")
    git(repo, "config", "user.name", "perf")
    (repo / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    (repo / "models").mkdir()

    def commit(message: str, width: int, notes: str) -> None:
        (repo / "models" / "widening.py").write_text(WIDENING.format(width=width))
        (repo / "notes.txt").write_text(notes)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", message)

    commit("base", 256, "")
    git(repo, "checkout", "-q", "-b", "feature")
    commit("widen", 1024, "")
    git(repo, "checkout", "-q", "-b", "notes", "main")
    commit("notes", 256, "a release note\n")
    git(repo, "checkout", "-q", "main")


def timed(argv: list[str], cwd: Path, env: dict) -> tuple[float, subprocess.CompletedProcess]:
    load = os.getloadavg()[0]
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.monotonic() - start
    print(f"  (load before: {load:.2f}) {' '.join(argv[:4])} ... exit {proc.returncode}, "
          f"{took:.1f} s", flush=True)
    return took, proc


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    args = p.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="ab-cost-"))
    repo = work / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    make_repo(repo)
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    print("one run of the suite at main (snakemake --cores 2 all, cold):")
    report_s, proc = timed([str(BIN / "snakemake"), "-s", str(REPO / "Snakefile"), "--cores",
                            "2", "all", "--directory", str(work / "run"), "--configfile",
                            str(repo / "suite.yaml")], work, env)
    if proc.returncode != 0:
        sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
    results = {}
    for new in ("feature", "notes"):
        print(f"benchflow ab --base main --new {new} (fresh cache):")
        took, proc = timed([str(BIN / "benchflow"), "ab", "--base", "main", "--new", new,
                            "--configfile", str(repo / "suite.yaml"), "--cache",
                            str(work / f"cache-{new}"), "--output",
                            str(work / f"ab-{new}.json")], repo, env)
        results[new] = took
        print("    " + "\n    ".join(proc.stdout.strip().splitlines()))
        if proc.returncode not in (0, 1):
            print(proc.stderr[-3000:])
    print(f"suite run {report_s:.1f} s; ab, one model changed {results['feature']:.1f} s "
          f"(x{results['feature'] / report_s:.2f} of the suite run; goal <= 1.5); ab, "
          f"nothing changed {results['notes']:.1f} s (x{results['notes'] / report_s:.3f})")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
