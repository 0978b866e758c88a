"""`benchflow ab`: builds results/ab.json (the suite's interleaved A/B pairs) with
Snakemake, then prints one line per pair and workload; exit 1 when any is a regression.

    benchflow ab --configfile suite.yaml [--cores 2] [-- extra snakemake options]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from workflow.errors import ConfigError
from workflow.paths import AB, REPO_ROOT


def add_parser(sub) -> None:
    p = sub.add_parser("ab", help="interleaved A/B comparison of the suite's ab_pairs "
                                  "(results/ab.json); exit 1 on a regression")
    p.add_argument("--configfile", required=True, type=Path,
                   help="the suite (it must declare ab_pairs)")
    p.add_argument("--cores", default="all", help="snakemake --cores (default: all)")
    p.add_argument("--directory", type=Path, default=Path("."),
                   help="the working directory holding results/ (default: here)")
    p.add_argument("snakemake_args", nargs=argparse.REMAINDER,
                   help="after --: more snakemake options")
    p.set_defaults(func=run)


def line(row: dict) -> str:
    """One A/B row as a line: verdict, ratio and interval, p, rounds, seconds."""
    head = f"{row['verdict'].upper():<13} {row['base']} -> {row['new']}  {row['workload']}"
    if row["verdict"] == "failed":
        return f"{head}  ({row.get('failed_stage')}: {row.get('error')})"
    ci = row.get("ci95") or row.get("ci")
    interval = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "[no interval]"
    mde = f"x{row['mde']:.3f}" if row.get("mde") else "none"
    return (f"{head}  x{row['ratio']:.3f} {interval} p={row['p_value']:.3g}  "
            f"{row['rounds']} rounds, {row['seconds']:.1f} s ({row['stop_reason']}), "
            f"detectable {mde}")


def run(args: argparse.Namespace) -> int:
    if not args.configfile.is_file():
        raise ConfigError([f"{args.configfile}: no such suite file"])
    extra = [a for a in args.snakemake_args if a != "--"]
    # The target before --configfile, which takes every word after it.
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"),
           "--directory", str(args.directory), "--cores", str(args.cores), AB, *extra,
           "--configfile", str(args.configfile.resolve())]
    proc = subprocess.run(cmd)
    if proc.returncode != 0:
        return proc.returncode
    doc = json.loads((args.directory / AB).read_text())
    for row in doc["pairs"]:
        print(line(row))
    return 1 if any(r["verdict"] == "regression" for r in doc["pairs"]) else 0
