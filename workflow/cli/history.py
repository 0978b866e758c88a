"""`benchflow history`: every run remembered (README, "History").

  ingest FILE...   benchflow reports (any schema version), benchflow/Forge results files,
                   torchao CSVs, v3 JSON/JSONL as the OSS uploader takes them; idempotent
  show [CASE|GLOB] a series with its runs' commits and versions (no argument: the runs)
  detect [GLOB]    change points per series; exits as the gates do (0 passed, 1 a
                   regression, 2 bad input, 3 nothing could be judged)
  html [-o FILE]   the page of every series, change points marked"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from workflow.cli.options import EXIT_CODES, gate_command

LATENCY = "latency median (ms)"


def add_parser(sub) -> None:
    p = sub.add_parser("history", help="every run remembered: ingest reports, show a series, "
                                       "detect change points (exit as the gates)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="verb", required=True)

    ing = verbs.add_parser("ingest", help="add runs to the history (idempotent)")
    ing.add_argument("files", nargs="+", type=Path)
    ing.add_argument("--timestamp", type=int, metavar="UNIX_SECONDS",
                     help="when the run was measured, for a file that does not say "
                          "(a torchao CSV)")
    for flag, column in (("--repo", "repo"), ("--branch", "head_branch"),
                         ("--sha", "head_sha"), ("--name", "name")):
        ing.add_argument(flag, dest=column, metavar=column.upper(),
                         help=f"the run's {column} (default: the CI's variables, else git "
                              "of the file's directory)")
    _store_options(ing)
    ing.set_defaults(func=run_ingest)

    show = verbs.add_parser("show", help="a series (CASE or GLOB) or, without one, the runs")
    show.add_argument("pattern", nargs="?", metavar="CASE|GLOB")
    show.add_argument("--metric", default=LATENCY, help=f"default {LATENCY!r}")
    show.add_argument("--format", choices=["text", "json"], default="text")
    _store_options(show)
    show.set_defaults(func=run_show)

    det = verbs.add_parser("detect", help="change points of every series (exit as the gates)")
    det.add_argument("pattern", nargs="?", default="*", metavar="GLOB")
    det.add_argument("--metric", default=LATENCY, help=f"default {LATENCY!r}")
    det.add_argument("--since", metavar="RUN|SHA|DATE",
                     help="judge only change points at or after this run id, commit "
                          "(prefix) or ISO date; earlier ones are listed, not judged")
    det.add_argument("--format", choices=["text", "json"], default="text")
    _store_options(det)
    det.set_defaults(func=gate_command(run_detect))

    page = verbs.add_parser("html", help="the page of every series (results/history.html)")
    page.add_argument("pattern", nargs="?", default="*", metavar="GLOB")
    page.add_argument("-o", "--output", type=Path, default=Path("results/history.html"))
    page.add_argument("--metric", default=LATENCY, help=f"default {LATENCY!r}")
    _store_options(page)
    page.set_defaults(func=run_html)


def _store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", type=Path,
                   help="take the store and the detection settings from this suite's "
                        "`history` section (default: the schema's defaults)")
    p.add_argument("--store", type=Path, help="the embedded store's directory "
                                              "(default: the suite's history.path, history/)")
    p.add_argument("--url", help="a ClickHouse server instead (http[s]://user:pass@host:port/db)")


def _open(args, create: bool = False):
    from workflow.stages import history

    config = history.history_config(args.configfile)
    where = history.where(config, store=args.store, url=args.url)
    st = history.store_of(config, store=args.store, url=args.url, create=create)
    return history, config, st, where


def run_ingest(args: argparse.Namespace) -> int:
    from workflow.stages import history

    overrides = {k: getattr(args, k) for k in ("repo", "head_branch", "head_sha", "name")
                 if getattr(args, k)}
    # Every file read and checked first: a bad one leaves the store as it was (or absent).
    runs = history.read(args.files, overrides=overrides, timestamp=args.timestamp)
    _, _, st, where = _open(args, create=True)
    try:
        done = history.ingest(runs, st)
    finally:
        st.close()
    for run_id in done["ingested"]:
        print(f"ingested run {run_id}")
    for run_id in done["already"]:
        print(f"already in the history: run {run_id} (nothing added)")
    print(f"{len(done['ingested'])} run(s) ingested, {done['rows']} row(s), into {where}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    from workflow.history import query
    from workflow.render import history_text

    _, _, st, where = _open(args)
    try:
        if args.pattern is None:
            rows = query.runs(st)
            print(json.dumps(rows, indent=1) if args.format == "json"
                  else history_text.runs_table(rows, where))
            return 0
        series = query.series(st, args.pattern, args.metric)
    finally:
        st.close()
    if not series:
        print(f"no series matches {args.pattern!r} for metric {args.metric!r} in {where}")
        return 1
    print(json.dumps(series, indent=1) if args.format == "json"
          else history_text.series_tables(series))
    return 0


def run_detect(args: argparse.Namespace) -> int:
    history, config, st, _ = _open(args)
    try:
        result, outcome, lines = history.detect(st, config, pattern=args.pattern,
                                                metric=args.metric, since=args.since)
    finally:
        st.close()
    if args.format == "json":
        print(json.dumps({"outcome": outcome, **result}, indent=1))
    else:
        for line in lines:
            print(line)
    return EXIT_CODES[outcome]


def run_html(args: argparse.Namespace) -> int:
    history, config, st, where = _open(args)
    try:
        history.write_page(args.output, st, config, location=where, pattern=args.pattern,
                           metric=args.metric)
    finally:
        st.close()
    print(f"wrote {args.output}")
    return 0
