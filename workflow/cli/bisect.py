"""`benchflow bisect`: the first commit (or release) at which a case got slower, found by
paired A/B steps. Exit 0 when no bad revision was found (the ends do not
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
from workflow.stats.ratio_text import ratio_text


def default_cache() -> Path:
    """The user's benchflow cache (backends/iree/tools.cache_dir: $BENCHFLOW_CACHE_DIR,
    else $XDG_CACHE_HOME/benchflow, else ~/.cache/benchflow), bisect/ in it: outside the
    working directory, which is often the very repository bisected and must not change."""
    from workflow.backends.iree.tools import cache_dir

    return cache_dir() / "bisect"


def cache_directory(given: Path | None) -> Path:
    """The cache `--cache` names (default_cache without it), resolved; ConfigError, one
    line naming --cache, when it or a folder above it is no directory: refused before
    anything is keyed (its first write, a lock file in it, ended in a traceback)."""
    from workflow.errors import ConfigError
    from workflow.files import directory_problem

    cache = (given or default_cache()).resolve()
    for path in (cache, *cache.parents):
        problem = directory_problem(path)
        if problem:
            raise ConfigError([f"--cache {given or cache}: {path} {problem}; "
                               "expected a directory (the revisions' trees and builds "
                               "are kept in it), or one to make"])
        if path.exists():
            break
    return cache


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
    p.add_argument("--cache", type=Path,
                   help="the revisions' trees and builds, reused (default: bisect/ in the "
                        "user's benchflow cache, $BENCHFLOW_CACHE_DIR or "
                        f"$XDG_CACHE_HOME/benchflow; here {default_cache()})")
    p.add_argument("--store", type=Path,
                   help="keep each step's two measurements in this history store, each "
                        "under its revision (made when absent, as `benchflow history "
                        "ingest` makes one; refused before measuring when it is no store; "
                        "default: the suite's history.path where that store exists and "
                        "is the suite's own)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=gate_command(run), interrupted=interrupted)


def interrupted(args: argparse.Namespace) -> str:
    """What Ctrl-C leaves (cli/main.py prints it): the trees and builds in the cache;
    the steps' measurements, kept in the history only once the search ends, are not."""
    cache = (args.cache or default_cache()).resolve()
    return ("benchflow bisect; rerun to finish: the revisions' trees and builds made so "
            f"far are kept in {cache} and reused, the steps are measured again")


def step_line(step: dict, label) -> str:
    """`step  <rev> vs <rev>  REGRESSION x1.93 [1.88, 1.99] 24 rounds` or a skip: by
    content (`same inputs as <rev>`), or a revision that could not be measured (why)."""
    if step["kind"] == "skipped":
        why = f"same inputs as {label(step['same_as'])}" if step.get("same_as") \
            else step["why"]
        return f"  skipped {label(step['revision'])}: {why}"
    ci = step.get("ci")
    interval = f" [{ratio_text(ci[0])}, {ratio_text(ci[1])}]" if ci else ""
    ratio = f" x{ratio_text(step['ratio'])}{interval}" if step.get("ratio") is not None else ""
    retry = " (retried, longer budget)" if step["retried"] else ""
    return (f"  {step['kind']:<7} {label(step['revision'])} vs {label(step['against'])}  "
            f"{step['verdict'].upper()}{ratio}  {step['rounds']} rounds{retry}")


def step_lines(steps: list[dict], label) -> list[str]:
    """A line per step, the revisions skipped for one group's inputs in one line
    (`skipped 998 revisions <first>..<last>: same inputs as <rev>`): over a long range
    of commits that change nothing the case reads, one line a commit would bury the
    steps. The JSON lists every one."""
    lines: list[str] = []
    same: list[dict] = []
    for step in [*steps, None]:
        joins = step is not None and step["kind"] == "skipped" and step.get("same_as")
        if same and not (joins and step["same_as"] == same[0]["same_as"]):
            lines.append(step_line(same[0], label) if len(same) == 1 else
                         f"  skipped {len(same)} revisions {label(same[0]['revision'])}.."
                         f"{label(same[-1]['revision'])}: same inputs as "
                         f"{label(same[0]['same_as'])}")
            same = []
        if joins:
            same.append(step)
        elif step is not None:
            lines.append(step_line(step, label))
    return lines


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
    # A skip's why names the revision as measure said it (in full): shown as the rest.
    lines += step_lines([{**s, "why": shortened(s["why"], result["revisions"], label)}
                         if s["kind"] == "skipped" and not s.get("same_as") else s
                         for s in result["steps"]], label)
    if result.get("history"):
        kept = result["history"]
        lines.append(f"history: {kept['error']}; the steps were not kept" if "error" in kept
                     else history_line(kept))
    return [printable(line) for line in lines]


def run(args: argparse.Namespace) -> int:
    from workflow.bisect import run as bisecting
    from workflow.bisect.history import check_store, store_settings
    from workflow.bisect.history import keep as kept
    from workflow.errors import ConfigError
    from workflow.files import file_problem

    problem = file_problem(args.configfile)
    if problem:
        raise ConfigError([f"{args.configfile}: --configfile: {problem}; expected the "
                           "suite file"])
    cache = cache_directory(args.cache)
    # The history settings and the store read before anything is measured: a bad
    # section, or a --store that is no history store, is bad input, not steps lost after
    # minutes of measuring.
    store_config = store_settings(args.configfile)
    check_store(store_config, args.store, args.configfile.resolve().parent)
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
