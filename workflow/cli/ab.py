"""`benchflow ab`: builds results/ab.json (the suite's interleaved A/B pairs) with
Snakemake, then prints one line per pair and workload. Exit 0 when every row was judged
and none regressed, 1 on a regression, 2 for bad input (no such suite, a suite that does
not load or declares no ab_pairs, an unreadable ab.json), 3 when a row could not be judged
(failed, or inconclusive without --allow-inconclusive) or snakemake failed.

    benchflow ab --configfile suite.yaml [--cores 2] [--allow-inconclusive]
                 [-- extra snakemake options]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workflow.cli.options import EXIT_CODES, add_allow_inconclusive, gate_command
from workflow.render import ab as ab_render
from workflow.render.text import printable
from workflow.stages.gates import ab_gate
from workflow.stats.enums import ABVerdict


def add_parser(sub) -> None:
    p = sub.add_parser("ab", help="interleaved A/B comparison of the suite's ab_pairs "
                                  "(results/ab.json); exit 1 on a regression, 2 for bad "
                                  "input, 3 when a pair could not be judged")
    p.add_argument("--configfile", required=True, type=Path,
                   help="the suite (it must declare ab_pairs)")
    p.add_argument("--cores", default="all", help="snakemake --cores (default: all)")
    p.add_argument("--directory", type=Path, default=None,
                   help="the working directory holding results/ (default: the suite's "
                        "own, as snakemake started here chooses it: here, or runs/<name>/ "
                        "when here holds another suite's results)")
    add_allow_inconclusive(p, "inconclusive rows")
    p.add_argument("snakemake_args", nargs=argparse.REMAINDER,
                   help="after --: more snakemake options")
    p.set_defaults(func=gate_command(run))


def line(row: dict) -> str:
    """One A/B row as a line: verdict, ratio and interval, p, rounds, seconds."""
    head = (f"{row['verdict'].upper():<13} {row['base']} -> {row['new']}  "
            f"{ab_render.workload_cell(row).replace('→', '->')}")
    if row["verdict"] == ABVerdict.FAILED:
        return f"{head}  ({row.get('failed_stage')}: {row.get('error')})"
    ci = row.get("ci95") or row.get("ci")
    interval = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "[no interval]"
    mde = f"x{row['mde']:.3f}" if row.get("mde") else "none"
    notes = [n for n in (ab_render.protocol_note(row), ab_render.decide_note(row)) if n]
    return (f"{head}  x{row['ratio']:.3f} {interval} p={row['p_value']:.3g}  "
            f"{row['rounds']} rounds, {row['seconds']:.1f} s ({row['stop_reason']}), "
            f"detectable {mde}" + "".join(f"; {n}" for n in notes))


def run(args: argparse.Namespace) -> int:
    """Builds and judges the A/B rows (stages/gates.py), then prints a line per row and
    the gate's lines."""
    gated = ab_gate(args.configfile, cores=args.cores, directory=args.directory,
                    extra=args.snakemake_args, allow_inconclusive=args.allow_inconclusive)
    # A row's text (a tool's error, a SKU's name) is shown with its control characters
    # escaped: ab.json is a file, and what it holds is not trusted to be harmless.
    for row in gated.rows:
        print(printable(line(row)))
        for text in ab_render.why_lines(row):
            print(printable(f"  {text}"))
    for text in gated.lines:
        print(printable(text))
    return EXIT_CODES[gated.outcome]
