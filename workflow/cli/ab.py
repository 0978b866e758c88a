"""`benchflow ab`: builds results/ab.json (the suite's interleaved A/B pairs) with
Snakemake, then prints one line per pair and workload. Exit 0 when every row was judged
and none regressed, 1 on a regression, 2 for bad input (no such suite, a suite that does
not load or declares no ab_pairs, an unreadable ab.json), 3 when a row could not be judged
(failed, or inconclusive without --allow-inconclusive) or snakemake failed.

    benchflow ab --configfile suite.yaml [--cores 2] [--allow-inconclusive]
                 [-- extra snakemake options]

With --base and --new, the whole suite at two commits instead (bisect/suite_ab.py): each
case whose inputs differ measured as a paired A/B of the two revisions, the others
listed; the same exit codes.

    benchflow ab --base main --new HEAD --configfile suite.yaml [--repo DIR]
                 [--cases GLOB] [--summary FILE] [--output results/ab.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workflow.cli.options import EXIT_CODES, add_allow_inconclusive, gate_command
from workflow.gating.gates import ab_gate
from workflow.render import ab as ab_render
from workflow.render.text import printable
from workflow.stats.enums import ABVerdict
from workflow.stats.ratio_text import ratio_text


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
    revs = p.add_argument_group("two revisions (a pull request: the whole suite at --base "
                                "and --new)")
    revs.add_argument("--base", help="the revision compared against (a commit, branch or tag)")
    revs.add_argument("--new", help="the revision judged (e.g. HEAD of a pull request)")
    revs.add_argument("--repo", type=Path, help="the git repository holding the suite and "
                                                "its model files (default: the suite's)")
    revs.add_argument("--cases", metavar="GLOB",
                      help="only the case ids this glob matches (`benchflow list --cases`)")
    revs.add_argument("--summary", type=Path, metavar="FILE",
                      help="also write the comparison as Markdown for a pull request "
                           "comment (appended to $GITHUB_STEP_SUMMARY too when set)")
    revs.add_argument("--output", type=Path, default=Path("results") / "ab.json",
                      help="the rows as JSON (default results/ab.json)")
    revs.add_argument("--cache", type=Path, default=None,
                      help="the revisions' trees and builds, reused (default: bisect's)")
    revs.add_argument("--store", type=Path,
                      help="keep each measured IREE case's two sides in this history store, "
                           "each under its revision, as bisect's steps are (made when "
                           "absent; default: the suite's own history store where it exists)")
    p.add_argument("snakemake_args", nargs=argparse.REMAINDER,
                   help="after --: more snakemake options")
    p.set_defaults(func=gate_command(run), interrupted=interrupted)


def interrupted(args: argparse.Namespace) -> str:
    """What Ctrl-C leaves (cli/main.py prints it): the A/B rows snakemake finished stay in
    results/ and are not measured again; two revisions' trees and builds stay in the
    cache, their pairs (measured in this process) are measured again."""
    if args.base or args.new:
        from workflow.cli.bisect import default_cache

        cache = (args.cache or default_cache()).resolve()
        return ("benchflow ab --base --new; rerun to finish: the revisions' trees and "
                f"builds made so far are kept in {cache} and reused, the pairs are "
                "measured again")
    return ("benchflow ab; rerun to finish: the A/B rows that were finished are kept and "
            "not measured again")


def line(row: dict) -> str:
    """One A/B row as a line: verdict, ratio and interval, p, rounds, seconds."""
    head = (f"{row['verdict'].upper():<13} {row['base']} -> {row['new']}  "
            f"{ab_render.workload_cell(row).replace('→', '->')}")
    if row["verdict"] == ABVerdict.FAILED:
        return f"{head}  ({row.get('failed_stage')}: {row.get('error')})"
    ci = row.get("ci95") or row.get("ci")
    interval = f"[{ratio_text(ci[0])}, {ratio_text(ci[1])}]" if ci else "[no interval]"
    mde = f"x{ratio_text(row['mde'])}" if row.get("mde") else "none"
    notes = [n for n in (ab_render.protocol_note(row), ab_render.decide_note(row)) if n]
    return (f"{head}  x{ratio_text(row['ratio'])} {interval} p={row['p_value']:.3g}  "
            f"{row['rounds']} rounds, {row['seconds']:.1f} s ({row['stop_reason']}), "
            f"detectable {mde}" + "".join(f"; {n}" for n in notes))


def run(args: argparse.Namespace) -> int:
    """Builds and judges the A/B rows (gating/gates.py), then prints a line per row and
    the gate's lines; with --base/--new, the two revisions' comparison instead."""
    if args.base or args.new:
        return run_revisions(args)
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


def run_revisions(args: argparse.Namespace) -> int:
    """The whole suite at --base and --new (bisect/suite_ab.compare): the rows written to
    --output (and --summary, $GITHUB_STEP_SUMMARY), a line per changed case printed."""
    from datetime import UTC, datetime

    from workflow.bisect import suite_ab
    from workflow.bisect.history import check_store, store_settings
    from workflow.cli.bisect import cache_directory
    from workflow.errors import ConfigError
    from workflow.files import file_problem
    from workflow.records.storage import write_json
    from workflow.render import ab_revisions

    if not (args.base and args.new):
        raise ConfigError([f"--{'new' if args.base else 'base'}: missing; expected both "
                           "--base and --new (two revisions of the suite's repository)"])
    problem = file_problem(args.configfile)
    if problem:
        raise ConfigError([f"{args.configfile}: --configfile: {problem}; expected the "
                           "suite file"])
    _check_output(args.output)
    # The history settings and the store, checked before anything is measured.
    store_config = store_settings(args.configfile)
    check_store(store_config, args.store, args.configfile.resolve().parent)
    cache = cache_directory(args.cache)
    revs = suite_ab.revisions(args.repo, args.configfile, args.base, args.new)
    out = cache / "history" / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    # Progress on stderr: stdout is the comparison, which a CI step may keep.
    doc = suite_ab.compare(revs, cache, pattern=args.cases,
                           allow_inconclusive=args.allow_inconclusive,
                           say=lambda text: print(printable(text), file=sys.stderr, flush=True),
                           keep=suite_ab.keep_sides(revs, args.configfile, store_config,
                                                    args.store, out))
    write_json(args.output, doc)
    text = ab_revisions.markdown(doc)
    for path in filter(None, (args.summary, suite_ab.step_summary_path())):
        with open(path, "a" if path != args.summary else "w", encoding="utf-8") as fh:
            fh.write(text)
    for line_ in ab_revisions.text_lines(doc):
        print(line_)
    return EXIT_CODES[doc["outcome"]]


def _check_output(path: Path) -> None:
    """--output is refused before anything is measured when it holds something other
    than an earlier two-revision comparison (a suite's own ab.json from its ab_pairs,
    which Snakemake made and would make again, or any other file). Read as any file
    from outside: a regular file only, capped, bytes decoded with replacement."""
    import json

    from workflow.errors import ConfigError
    from workflow.files import read_bytes
    from workflow.records.storage import MAX_JSON_BYTES

    if not path.exists() and not path.is_symlink():
        return
    refused = ConfigError([f"{path}: --output: holds something other than a two-revision "
                           "comparison (e.g. the suite's own ab_pairs rows); expected a new "
                           "path or an earlier `benchflow ab --base --new` output"])
    try:
        earlier = json.loads(read_bytes(path, cap=MAX_JSON_BYTES, what="a JSON file")
                             .decode("utf-8", errors="replace"))
    except (ConfigError, ValueError):
        raise refused from None
    if not (isinstance(earlier, dict) and "revisions" in earlier):
        raise refused
