"""`benchflow bisect`: the first commit (or release) at which a case got slower, found by
paired A/B steps (issue 38). Exit 0 when no bad revision was found (the ends do not
differ, or the bad end is faster), 1 when one was, 2 for bad input, 3 when a step could
not be judged even with a longer budget.

    benchflow bisect CASE --good REV --bad REV --configfile SUITE [--repo PATH]
    benchflow bisect CASE --package iree-base-compiler --good 3.9.0 --bad 3.10.0 \\
        --configfile SUITE
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

from workflow.cli.options import EXIT_CODES, gate_command
from workflow.render.text import printable

DEFAULT_CACHE = Path(".benchflow") / "bisect"


def add_parser(sub) -> None:
    p = sub.add_parser("bisect", help="the first commit or release at which a case changed, "
                                      "by paired A/B steps; exit 1 when one is found, 0 when "
                                      "none, 2 for bad input, 3 when it could not judge",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("case", help="a case id as `benchflow list --cases` prints it "
                                "(sku/backend/workload/recipe)")
    p.add_argument("--good", required=True, help="a revision (or release) without the change")
    p.add_argument("--bad", required=True, help="a later one with it")
    p.add_argument("--configfile", required=True, type=Path,
                   help="the suite; over commits it is read at each revision")
    p.add_argument("--repo", type=Path, help="the git repository holding the suite and its "
                                             "model files (default: the suite's)")
    p.add_argument("--package", help="bisect over this package's releases instead "
                                     "(iree-base-compiler, iree-base-runtime)")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                   help=f"the revisions' trees and builds, reused (default {DEFAULT_CACHE})")
    p.add_argument("--store", type=Path,
                   help="keep each step's two measurements in this history store, each "
                        "under its revision (made when absent, as `benchflow history "
                        "ingest` makes one; default: the suite's history.path where that "
                        "store exists)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=gate_command(run))


def step_line(step: dict, label) -> str:
    """`step  <rev> vs <rev>  REGRESSION x1.93 [1.88, 1.99] 24 rounds` or a skip."""
    if step["kind"] == "skipped":
        return f"  skipped {label(step['revision'])}: same inputs as {label(step['same_as'])}"
    ci = step.get("ci")
    interval = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
    ratio = f" x{step['ratio']:.3f}{interval}" if step.get("ratio") is not None else ""
    retry = " (retried, longer budget)" if step["retried"] else ""
    return (f"  {step['kind']:<7} {label(step['revision'])} vs {label(step['against'])}  "
            f"{step['verdict'].upper()}{ratio}  {step['rounds']} rounds{retry}")


def shortened(text: str, names: list[str], label) -> str:
    """`text` with every revision's name as `label` shows it (a commit's 12 characters,
    as the step columns): the JSON keeps the full names, the text is read."""
    for name in names:
        text = text.replace(name, label(name))
    return text


def text_lines(result: dict, label) -> list[str]:
    from workflow.bisect.history import history_line
    from workflow.bisect.run import OUTCOME_HEADS
    from workflow.regression.explain import text_lines as explanation

    summary = shortened(result["summary"], result["revisions"], label)
    lines = [f"{OUTCOME_HEADS[result['outcome']]}: {summary}"]
    final = result.get("final")
    if result["first_bad"] and final and final.get("attribution"):
        lines += explanation(final["attribution"])
    lines.append(f"steps ({result['measured']} measured, {len(result['revisions'])} "
                 f"{result['kind']}s in {result['groups']} group(s) of equal inputs):")
    lines += [step_line(s, label) for s in result["steps"]]
    if result.get("history"):
        kept = result["history"]
        lines.append(f"history: {kept['error']}; the steps were not kept" if "error" in kept
                     else history_line(kept))
    return [printable(line) for line in lines]


def run(args: argparse.Namespace) -> int:
    from workflow.bisect import run as bisecting
    from workflow.bisect.history import keep as kept
    from workflow.bisect.history import store_settings
    from workflow.errors import ConfigError
    from workflow.files import file_problem

    problem = file_problem(args.configfile)
    if problem:
        raise ConfigError([f"{args.configfile}: --configfile: {problem}; expected the "
                           "suite file"])
    cache = args.cache.resolve()
    # The history settings read before anything is measured: a bad section is bad input.
    store_config = store_settings(args.configfile)
    if args.package:
        source = bisecting.package_source(args.package, args.configfile, args.good, args.bad,
                                          cache)
    else:
        source = bisecting.commit_source(args.repo, args.configfile, args.good, args.bad,
                                         cache)

    def keep(steps, built):
        out = cache / "history" / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        return kept(steps, built, source, store_config, args.store, out)

    result = bisecting.run(source, args.case, cache, keep=keep,
                           say=(lambda *a: None) if args.format == "json" else print)
    if args.format == "json":
        print(json.dumps(result, indent=1, default=str))
    else:
        for line in text_lines(result, source.label):
            print(line)
    return EXIT_CODES[result["outcome"]]
