"""`benchflow history`: every run remembered (docs/history.md).

  ingest FILE...   benchflow reports (any schema version), benchflow/Forge results files,
                   torchao CSVs, v3 JSON/JSONL as the OSS uploader takes them; idempotent
  show [CASE|GLOB] a series with its runs' commits and versions (no argument: the runs)
  detect [GLOB]    change points per series; exits as the gates do (0 passed, 1 a
                   regression, 2 bad input, 3 nothing could be judged)
  confirm [GLOB]   each change point (or --run RUN against the run before it) measured
                   again as a paired A/B of the two runs' commits: confirmed, refuted
                   or could not confirm; --bisect walks a confirmed regression to its
                   commit (exit 1 a confirmed regression, 3 an alert not confirmed)
  html [-o FILE]   the page of every series, change points marked
  remove RUN_ID    a run's rows out of the store (the way out of a bad run already held)
  repair           a damaged embedded store rebuilt from the runs that survive in it

Reading a store never writes to it (it is read from a snapshot); only ingest creates
one, and only in an empty or new directory; a write is kept whole or not at all (a full
disk leaves the store as it was); a damaged store is refused, left as it was, and named
with `history repair`, which keeps the damaged files."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workflow.cli.options import EXIT_CODES, gate_command

LATENCY = "latency median (ms)"
# `history ingest`'s exit status when a file's run held no measurement at all (as a gate
# that could not judge: cli/options.EXIT_CODES); 0 ingested, 1 bad input.
NOTHING_INGESTIBLE = 3
# What Ctrl-C leaves (cli/main.py prints it after `interrupted: `). An ingest stopped
# part way is undone (history/staging.py: it is kept whole or not at all), and a rerun
# adds only the measurements the store lacks; the reading verbs work on a snapshot, and
# the page is written whole or not at all.
INGEST_INTERRUPTED = ("benchflow history ingest; rerun it to add the rest: the store is as "
                      "it was before it, and ingest adds each measurement once")
READ_INTERRUPTED = "benchflow history {verb}; the store is unchanged (reading never writes it)"


def add_parser(sub) -> None:
    p = sub.add_parser("history", help="every run remembered: ingest reports, show a series, "
                                       "detect change points (exit as the gates)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="verb", required=True)

    _add_ingest(verbs)
    show = verbs.add_parser("show", help="a series (CASE or GLOB) or, without one, the runs")
    show.add_argument("pattern", nargs="?", metavar="CASE|GLOB")
    show.add_argument("--metric", default=LATENCY, help=f"default {LATENCY!r}")
    show.add_argument("--format", choices=["text", "json"], default="text")
    _store_options(show)
    show.set_defaults(func=store_command(run_show),
                      interrupted=READ_INTERRUPTED.format(verb="show"))

    det = verbs.add_parser("detect", help="change points of every series (exit as the gates)")
    det.add_argument("pattern", nargs="?", default="*", metavar="GLOB")
    det.add_argument("--metric", default=LATENCY, help=f"default {LATENCY!r}")
    det.add_argument("--since", metavar="RUN|SHA|DATE",
                     help="judge only change points at or after this run id, commit "
                          "(prefix) or ISO date; earlier ones are listed, not judged")
    det.add_argument("--format", choices=["text", "json"], default="text")
    _store_options(det)
    det.set_defaults(func=gate_command(run_detect),
                     interrupted=READ_INTERRUPTED.format(verb="detect"))

    _add_confirm(verbs)
    page = verbs.add_parser("html", help="the page of every series (results/history.html)")
    page.add_argument("pattern", nargs="?", default="*", metavar="GLOB")
    page.add_argument("-o", "--output", type=Path, default=Path("results/history.html"))
    page.add_argument("--metric", default=LATENCY, help=f"default {LATENCY!r}")
    _store_options(page)
    page.set_defaults(func=store_command(run_html),
                      interrupted=READ_INTERRUPTED.format(verb="html"))

    rm = verbs.add_parser("remove", help="remove one run's rows (`history show` lists runs)")
    rm.add_argument("run_id", metavar="RUN_ID")
    _store_options(rm)
    rm.set_defaults(func=store_command(run_remove),
                    interrupted="benchflow history remove; run it again to remove what is "
                                "left of the run")

    fix = verbs.add_parser("repair", help="rebuild a damaged embedded store from the runs "
                                          "that survive in it (its damaged files kept)")
    fix.add_argument("--configfile", type=Path,
                     help="take the store from this suite's `history` section")
    fix.add_argument("--store", type=Path, help="the embedded store's directory "
                                                "(default: the suite's history.path, history/)")
    fix.set_defaults(func=store_command(run_repair),
                     interrupted="benchflow history repair; the store is as it was, or "
                                 "repaired whole (a repair is swapped in at once): run it "
                                 "again")


def _add_ingest(verbs) -> None:
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
    ing.set_defaults(func=run_ingest, interrupted=INGEST_INTERRUPTED)


def store_command(run):
    """A verb's run(args) whose store is not there exits 2, bad input, as `detect` (a
    gate: options.gate_command) does: one code for one mistake in every verb."""
    import functools

    from workflow.cli.options import print_problems
    from workflow.history.store import NoStore
    from workflow.regression.gate import BAD_INPUT

    @functools.wraps(run)
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except NoStore as exc:
            print_problems(exc)
            return EXIT_CODES[BAD_INPUT]
    return wrapped


def _add_confirm(verbs) -> None:
    """`history confirm`'s options (its own function: add_parser stays readable)."""
    con = verbs.add_parser("confirm", help="confirm each alert by a paired A/B of the two "
                                           "runs' commits, bisect it with --bisect (exit "
                                           "as the gates)")
    con.add_argument("pattern", nargs="?", default="*", metavar="GLOB")
    con.add_argument("--metric", default=LATENCY, help=f"default {LATENCY!r}")
    con.add_argument("--since", metavar="RUN|SHA|DATE",
                     help="confirm only change points at or after this run id, commit or "
                          "date")
    con.add_argument("--run", metavar="RUN|newest",
                     help="instead of the change points: this run against the run before "
                          "it, in each series where it moved at least history.min_change "
                          "(`newest`: the newest run, which detect cannot judge yet)")
    con.add_argument("--repo", type=Path, help="the git repository holding the suite and "
                                               "its model files (default: the suite's)")
    con.add_argument("--cache", type=Path,
                     help="the commits' trees and builds, reused (default: bisect/ in the "
                          "user's benchflow cache)")
    con.add_argument("--bisect", action="store_true",
                     help="bisect each confirmed regression between the two runs' commits "
                          "to its first bad commit, with its dispatch")
    con.add_argument("--markdown", type=Path, metavar="FILE", help="also write the alert "
                                                                   "list as Markdown")
    con.add_argument("--json", type=Path, metavar="FILE", help="also write it as JSON")
    con.add_argument("--format", choices=["text", "json"], default="text")
    _store_options(con)
    con.set_defaults(func=gate_command(run_confirm),
                     interrupted="benchflow history confirm; rerun it: the store is "
                                 "unchanged, the trees and builds made so far are reused")


def _store_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", type=Path,
                   help="take the store and the detection settings from this suite's "
                        "`history` section (default: the schema's defaults)")
    p.add_argument("--store", type=Path, help="the embedded store's directory "
                                              "(default: the suite's history.path, history/)")
    p.add_argument("--url", help="a ClickHouse server instead (http[s]://user:pass@host:port/db)")


def _open(args, create: bool = False, write: bool = False):
    """(commands.history, the suite's history settings, the store, where it is). An
    embedded store opened to read is read from a snapshot (history/layout.py); ingest
    (`create`) may make one; remove writes one that exists."""
    from workflow.commands import history

    config = history.history_config(args.configfile)
    where = history.where(config, store=args.store, url=args.url)
    st = history.store_of(config, store=args.store, url=args.url, create=create, write=write)
    if not create:
        _warn_unusable(st, where)
    return history, config, st, where


def _warn_unusable(st, where: str) -> None:
    """One line a run no series can use (history/query.unusable), on stderr: the
    command goes on without it."""
    from workflow.history import query
    from workflow.render.text import printable

    try:
        bad = query.unusable(st)
    except BaseException:
        st.close()
        raise
    for run_id, why in bad.items():
        print(f"{where}: run {printable(run_id)}: {why}; left out: remove it with "
              f"`benchflow history remove {printable(run_id)}`", file=sys.stderr)


def run_ingest(args: argparse.Namespace) -> int:
    from workflow.commands import history

    overrides = {k: getattr(args, k) for k in ("repo", "head_branch", "head_sha", "name")
                 if getattr(args, k)}
    # Every file read and checked first: a bad one leaves the store as it was (or absent).
    runs = history.read(args.files, overrides=overrides, timestamp=args.timestamp)
    if all(not run.rows for run in runs):
        # Nothing to add: no store is opened, none made.
        where = history.where(history.history_config(args.configfile), store=args.store,
                              url=args.url)
        done = {"ingested": [], "already": [], "empty": [r.run_id for r in runs], "rows": 0}
    else:
        _, _, st, where = _open(args, create=True)
        try:
            done = history.ingest(runs, st)
        finally:
            st.close()
    for run_id in done["ingested"]:
        print(f"ingested run {run_id}")
    for run_id in done["already"]:
        print(f"already in the history: run {run_id} (nothing added)")
    empty = [run for run in runs if run.run_id in set(done["empty"])]
    for run in empty:
        print(_nothing_ingestible(run), file=sys.stderr)
    print(f"{len(done['ingested'])} run(s) ingested, {done['rows']} row(s), into {where}")
    # Its own exit status: a nightly job whose every case failed ingested nothing, and
    # exit 0 would read as a night recorded. A file of a run per case (appended records,
    # Forge's list) with some of them failed still recorded the night: 0.
    return NOTHING_INGESTIBLE if empty and not done["ingested"] and not done["already"] \
        else 0


def _nothing_ingestible(run) -> str:
    from workflow.render.text import printable

    cases = f"{run.cases} case(s)" if run.source != "forge" else f"{run.cases} entry(ies)"
    why = f" ({printable(run.skipped[0])})" if run.skipped else ""
    return (f"{run.path}: run {run.run_id}: nothing ingestible: {cases}, none with a "
            f"finite value{why}; nothing added (a run of failed cases has no measurement "
            "to keep)")


def run_remove(args: argparse.Namespace) -> int:
    from workflow.errors import ConfigError
    from workflow.history import sql

    sql.check_text(args.run_id, "RUN_ID")
    _, _, st, where = _open(args, write=True)
    try:
        held = st.rows(sql.run_rows(args.run_id))[0]["n"]
        if not held:
            raise ConfigError([f"{where}: run {args.run_id!r}: not in the history; expected "
                               "a run id that `benchflow history show` lists"])
        st.execute(sql.delete_run(args.run_id))
    finally:
        st.close()
    print(f"removed run {args.run_id} ({held} row(s)) from {where}")
    return 0


def run_repair(args: argparse.Namespace) -> int:
    from workflow.commands import history
    from workflow.errors import ConfigError
    from workflow.history import repair

    config = history.history_config(args.configfile)
    if args.store is None and config.get("url"):
        raise ConfigError([f"{history.where(config)}: history.url: a ClickHouse server's "
                           "store is the server's to repair; expected an embedded store "
                           "(--store DIR)"])
    path = Path(args.store if args.store is not None else config["path"])
    done = repair.repair(path)
    if not done["repaired"]:
        print(f"{path}: nothing to repair: it opens whole ({done['runs']} run(s), "
              f"{done['rows']} row(s))")
        return 0
    print(f"repaired {path}: {done['runs']} run(s), {done['rows']} row(s) from the "
          f"{done['parts']} data part(s) that survive")
    for part in done["lost"]:
        print(f"{path}: {part}: chdb refused this part (cut short or corrupt); its runs "
              "are not in the repaired store", file=sys.stderr)
    print(f"the damaged store's files are kept in {done['set_aside']}: remove it once "
          "`benchflow history show` lists what you expect")
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


# The suite in detect's bisect hints (history/detect.bisect_command): a placeholder there.
SUITE_HINT = "--configfile SUITE"


def _suite_in_hints(result: dict, lines: list[str], configfile: Path | None) -> list[str]:
    """The hints with this detection's --configfile in place of SUITE; without one, the
    text says what SUITE stands for (the JSON keeps the placeholder)."""
    import shlex

    if configfile is None:
        said = (f"{SUITE_HINT}  (SUITE: the suite file that measured the case; "
                "`history detect --configfile SUITE` writes it in)")
        return [line.replace(SUITE_HINT, said) for line in lines]
    suite = f"--configfile {shlex.quote(str(configfile))}"
    for cp in result.get("change_points", []):
        if cp.get("bisect"):
            cp["bisect"] = cp["bisect"].replace(SUITE_HINT, suite)
    return [line.replace(SUITE_HINT, suite) for line in lines]


def run_detect(args: argparse.Namespace) -> int:
    from workflow.history import sql

    if args.since is not None:
        sql.check_text(args.since, "--since")
    history, config, st, _ = _open(args)
    try:
        result, outcome, lines = history.detect(st, config, pattern=args.pattern,
                                                metric=args.metric, since=args.since)
    finally:
        st.close()
    lines = _suite_in_hints(result, lines, args.configfile)
    if args.format == "json":
        print(json.dumps({"outcome": outcome, **result}, indent=1))
    else:
        for line in lines:
            print(line)
    return EXIT_CODES[outcome]


def _check_confirm(args: argparse.Namespace) -> None:
    """confirm's options checked before the store is opened (ConfigError: exit 2)."""
    from workflow.errors import ConfigError
    from workflow.files import file_problem
    from workflow.history import sql

    if args.configfile is None:
        raise ConfigError(["history confirm: --configfile: missing; expected the suite file "
                           "that measured the runs (it is read at each run's commit)"])
    problem = file_problem(args.configfile)
    if problem:
        raise ConfigError([f"{args.configfile}: --configfile: {problem}; expected the "
                           "suite file"])
    for flag, value in (("--since", args.since), ("--run", args.run)):
        if value is not None:
            sql.check_text(value, flag)
    if args.since is not None and args.run is not None:
        raise ConfigError(["history confirm: --since and --run: given both; expected one "
                           "(--run confirms one run, --since the change points after it)"])


def run_confirm(args: argparse.Namespace) -> int:
    from workflow.bisect import confirm
    from workflow.bisect.history import NAMED, store_settings
    from workflow.cli.bisect import default_cache
    from workflow.commands import history
    from workflow.errors import ConfigError
    from workflow.history import query
    from workflow.records.storage import WriteError, write_json, write_text
    from workflow.render import alerts as listing
    from workflow.suite.defaults import history_settings

    _check_confirm(args)
    # The suite's history section alone: loading the suite would import its model
    # modules into this process, which the commits' trees each import in their own.
    config = {k: v for k, v in store_settings(args.configfile).items() if k != NAMED}
    where = history.where(config, store=args.store, url=args.url)
    st = history.store_of(config, store=args.store, url=args.url)
    _warn_unusable(st, where)  # closes the store itself when it fails
    try:
        series = query.series(st, args.pattern, args.metric)
    finally:
        st.close()
    if not series:
        raise ConfigError([f"{where}: no series matches {args.pattern!r} for metric "
                           f"{args.metric!r}; expected a case id or glob of an ingested case"])
    found, level, _ = confirm.alerts(series, history_settings(config), since=args.since,
                                     run=args.run)
    repo = args.repo or args.configfile.resolve().parent
    cache = (args.cache or default_cache()).resolve()
    say = print if args.format == "text" else (lambda line: None)
    done = [confirm.confirm(a, repo=repo, suite=args.configfile, cache=cache,
                            bisect=args.bisect, say=say) for a in found]
    outcome, summary = confirm.outcome(done, level)
    head = confirm.OUTCOME_HEADS[outcome]
    doc = {"outcome": outcome, "summary": summary, "alerts": done, "not_alerted": level}
    try:
        if args.markdown:
            write_text(args.markdown, listing.markdown(done, level, head, summary))
        if args.json:
            write_json(args.json, doc)
    except WriteError as exc:
        raise ConfigError([f"{exc}; expected --markdown/--json in a writable directory "
                           "with room for the file"]) from None
    if args.format == "json":
        print(json.dumps(doc, indent=1, default=str))
    else:
        for line in listing.text_lines(done, level, head, summary):
            print(line)
    return EXIT_CODES[outcome]


def run_html(args: argparse.Namespace) -> int:
    from workflow.errors import ConfigError
    from workflow.records.storage import WriteError

    history, config, st, where = _open(args)
    try:
        history.write_page(args.output, st, config, location=where, pattern=args.pattern,
                           metric=args.metric)
    except WriteError as exc:
        # A full or read-only disk under -o: one line (the page is written whole or not
        # at all, any earlier one left as it was), not a traceback.
        raise ConfigError([f"{exc}; expected -o in a writable directory with room for "
                           "the page (the store is unchanged)"]) from None
    finally:
        st.close()
    print(f"wrote {args.output}")
    return 0
