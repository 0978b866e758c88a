"""`benchflow check`: the gate. Exit 0 when every case was judged and none regressed, 1
naming every case that regressed vs its goldens, 2 for bad input, 3 when a case could not
be judged (docs/goldens.md, "Exit codes of the gates"); inconclusive IREE cases are measured again
first, within --remeasure-budget seconds. With --against-history N each case is judged
against the last N stored runs of it at its measurement configuration instead
(docs/goldens.md, "Against the history: a rolling baseline")."""

from __future__ import annotations

import argparse
from pathlib import Path

from workflow.cli.options import (
    EXIT_CODES,
    add_accept_config,
    add_allow_inconclusive,
    add_gate_options,
    gate_command,
    gate_settings,
)
from workflow.errors import ConfigError
from workflow.gating.gates import check_report

# Seconds `check` spends, in all, measuring again by default: the pairs of cases changed
# since their goldens (a pair decides a small module in 10-40 s on 2 cores, stopping at
# the ab plan's first decided look), then inconclusive cases' fresh invocations.
REMEASURE_BUDGET_S = 300.0


def add_parser(sub) -> None:
    p = sub.add_parser("check", help="the gate: exit 1 naming every case that regressed vs "
                                     "its goldens, 2 for bad input, 3 when a case could "
                                     "not be judged")
    p.add_argument("--report", required=True, type=Path)
    p.add_argument("--goldens", type=Path,
                   help="judge against this goldens directory (default: the report's verdicts)")
    p.add_argument("--require-goldens", action="store_true",
                   help="a case without a golden could not be judged (exit 3)")
    add_allow_inconclusive(p, "inconclusive cases, and a report with no golden at all,")
    p.add_argument("--remeasure-budget", type=float, default=REMEASURE_BUDGET_S,
                   metavar="SECONDS",
                   help="seconds in all for measuring again: each case changed since its "
                        "golden paired with the golden's kept baseline, then inconclusive "
                        f"IREE cases measured again, judged alone (default "
                        f"{REMEASURE_BUDGET_S:g}; 0: never); the run's files are read "
                        "beside the report's results/")
    p.add_argument("--unpaired", action="store_true",
                   help="judge every case from the numbers across runs, as before goldens "
                        "kept their baselines: no case is called unchanged or paired")
    p.add_argument("--gate-on-machine", action="store_true",
                   help="judge a case unchanged since its golden by its time as measured: "
                        "this machine's own drift fails the gate (default: ok by "
                        "construction, the drift said)")
    add_accept_config(p, "judge cases measured at another measurement configuration than "
                         "their golden")
    p.add_argument("--against-history", type=at_least_one, metavar="N",
                   help="judge each case against the last N stored runs of the same case "
                        "at the same measurement configuration (the history store), "
                        "pooled, instead of one blessing; exclusive with --goldens; a case "
                        "with fewer than 2 such runs could not be judged (exit 3)")
    p.add_argument("--configfile", type=Path,
                   help="the suite: judge against its goldens (goldens.dir, relative to "
                        "the working directory; --goldens wins), or with "
                        "--against-history, read the store of its `history` section "
                        "(default: the schema's defaults, history/)")
    p.add_argument("--store", type=Path,
                   help="with --against-history: the embedded store's directory")
    p.add_argument("--url", help="with --against-history: a ClickHouse server instead "
                                 "(http[s]://user:pass@host:port/db)")
    add_gate_options(p)
    p.set_defaults(func=gate_command(run))


def at_least_one(text: str) -> int:
    """--against-history's N: a whole number of runs, 1 or more."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of runs, 1 or "
                                         "more")
    return n


def run(args: argparse.Namespace) -> int:
    """Judges the report (gating/gates.py) and prints the gate's lines."""
    if args.against_history is not None:
        return run_against_history(args)
    store_options = [f for f, v in (("--store", args.store), ("--url", args.url)) if v]
    if store_options:
        raise ConfigError([f"{', '.join(store_options)}: name the history store, which "
                           "only --against-history N reads"])
    goldens, goldens_from = args.goldens, "--goldens"
    if goldens is None and args.configfile is not None:
        goldens, goldens_from = suite_goldens(args.configfile)
    gated = check_report(args.report, goldens=goldens,
                         require_goldens=args.require_goldens,
                         allow_inconclusive=args.allow_inconclusive,
                         remeasure_budget_s=args.remeasure_budget,
                         settings=gate_settings(args), accept_config=args.accept_config,
                         unpaired=args.unpaired, gate_on_machine=args.gate_on_machine,
                         goldens_from=goldens_from)
    for text in gated.lines:
        print(text)
    return EXIT_CODES[gated.outcome]


def suite_goldens(configfile: Path) -> tuple[Path, str]:
    """The goldens directory of the suite `configfile` (its goldens.dir, relative to the
    working directory as a run reads it), and how a problem with it names it."""
    from workflow.planning.plan import command_suite

    suite = command_suite([configfile], {})
    return Path(suite.config["goldens"]["dir"]), f"goldens.dir of {configfile}"


def run_against_history(args: argparse.Namespace) -> int:
    """--against-history N: the report judged against the store's last N runs of each
    case (gating/gates.check_against_history), the store opened to read as `benchflow
    history detect` opens it."""
    from workflow.cli.history import _open
    from workflow.gating.gates import check_against_history

    if args.goldens is not None:
        raise ConfigError(["--against-history and --goldens are exclusive: judge against "
                           "the last N stored runs, or against a goldens directory"])
    if args.accept_config:
        raise ConfigError(["--accept-config applies to goldens: --against-history judges "
                           "a case only against stored runs at its own measurement "
                           "configuration"])
    _, _, st, where = _open(args)
    try:
        gated = check_against_history(args.report, st, args.against_history, where=where,
                                      require_goldens=args.require_goldens,
                                      allow_inconclusive=args.allow_inconclusive,
                                      settings=gate_settings(args))
    finally:
        st.close()
    for text in gated.lines:
        print(text)
    return EXIT_CODES[gated.outcome]
