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
import json
import sys
from pathlib import Path

from workflow.backends.proc import run_attached
from workflow.cli.options import EXIT_CODES, HEADS, add_allow_inconclusive, gate_command
from workflow.errors import ConfigError
from workflow.paths import AB, REPO_ROOT
from workflow.regression.gate import PASSED, REGRESSED, UNJUDGED
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
    head = f"{row['verdict'].upper():<13} {row['base']} -> {row['new']}  {row['workload']}"
    if row["verdict"] == ABVerdict.FAILED:
        return f"{head}  ({row.get('failed_stage')}: {row.get('error')})"
    ci = row.get("ci95") or row.get("ci")
    interval = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "[no interval]"
    mde = f"x{row['mde']:.3f}" if row.get("mde") else "none"
    return (f"{head}  x{row['ratio']:.3f} {interval} p={row['p_value']:.3g}  "
            f"{row['rounds']} rounds, {row['seconds']:.1f} s ({row['stop_reason']}), "
            f"detectable {mde}")


def outcome(rows: list[dict], allow_inconclusive: bool) -> tuple[str, list[str]]:
    """The gate's outcome of A/B rows (workflow/regression/gate.py's names) and its
    lines: one per row not judged, naming the pair and why, then the summary."""
    def pair(r: dict) -> str:
        return f"{r['base']} -> {r['new']} {r['workload']}"

    regressed = [r for r in rows if r["verdict"] == ABVerdict.REGRESSION]
    failed = [r for r in rows if r["verdict"] == ABVerdict.FAILED]
    inconclusive = [r for r in rows if r["verdict"] == ABVerdict.INCONCLUSIVE]
    unjudged = failed + ([] if allow_inconclusive else inconclusive)
    result = REGRESSED if regressed else UNJUDGED if unjudged else PASSED
    lines = [f"COULD NOT JUDGE {pair(r)}: failed at {r.get('failed_stage')}, no rounds "
             f"measured: {r.get('error')}" for r in failed]
    lines += [f"{'NOT JUDGED' if allow_inconclusive else 'COULD NOT JUDGE'} {pair(r)}: "
              f"inconclusive, its interval spans the margin after {r['rounds']} rounds "
              f"({r['stop_reason']})"
              + (" (counted as ok: --allow-inconclusive)" if allow_inconclusive else "")
              for r in inconclusive]
    lines.append(f"{HEADS[result]}: {len(regressed)} of {len(rows)} A/B row(s) regressed, "
                 f"{len(unjudged)} could not be judged")
    return result, lines


def read_rows(path: Path) -> list[dict]:
    """The rows of an ab.json; bad input (ConfigError) when it cannot be read."""
    try:
        doc = json.loads(path.read_text())
        rows = doc["pairs"]
        if not isinstance(rows, list) or not all(isinstance(r, dict) and "verdict" in r
                                                 for r in rows):
            raise TypeError("pairs: expected a list of rows with a verdict")
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise ConfigError([f"{path}: cannot be read as A/B results: {exc}"]) from None
    if not rows:
        raise ConfigError([f"{path}: pairs: empty; expected a row per pair and workload"])
    return rows


def declares_pairs(configfile: Path):
    """The suite; bad input before any job: a suite that is not one, or declares no
    ab_pairs."""
    from workflow.suite.load import load

    if not configfile.is_file():
        raise ConfigError([f"{configfile}: no such suite file"])
    suite = load([str(configfile)], {})
    if not suite.ab_pairs:
        raise ConfigError([f"{configfile}: ab_pairs: none declared; expected at least one "
                           "{base, new} pair of SKUs (README, \"A/B comparisons\")"])
    return suite


def run(args: argparse.Namespace) -> int:
    from workflow.stages.plan import Refused
    from workflow.stages.suite_dir import suite_dir

    suite = declares_pairs(args.configfile)
    extra = [a for a in args.snakemake_args if a != "--"]
    if args.directory is None:
        # Where snakemake started here puts this suite's results (stages/suite_dir.py).
        try:
            where = suite_dir(suite, [args.configfile], directory_given=False).path
        except Refused as exc:
            raise ConfigError(exc.problems) from None
        directory = []
    else:
        where, directory = args.directory, ["--directory", str(args.directory)]
    # The target before --configfile, which takes every word after it.
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"),
           *directory, "--cores", str(args.cores), AB, *extra,
           "--configfile", str(args.configfile.resolve())]
    code = run_attached(cmd)
    if code != 0:
        print(f"COULD NOT JUDGE: snakemake exited {code} before {AB} was "
              "complete (its output above names the failed job)")
        return EXIT_CODES[UNJUDGED]
    rows = read_rows(where / AB)
    for row in rows:
        print(line(row))
    result, lines = outcome(rows, args.allow_inconclusive)
    for text in lines:
        print(text)
    return EXIT_CODES[result]
