"""`benchflow check`: the gate. Exit 0 when every case was judged and none regressed, 1
naming every case that regressed vs its goldens, 2 for bad input, 3 when a case could not
be judged (docs/goldens.md, "Exit codes of the gates"); inconclusive IREE cases are measured again
first, within --remeasure-budget seconds."""

from __future__ import annotations

import argparse
from pathlib import Path

from workflow.cli.options import (
    EXIT_CODES,
    add_allow_inconclusive,
    add_gate_options,
    gate_command,
    gate_settings,
)
from workflow.records.measurement_config import KEYS
from workflow.stages.gates import check_report

# Seconds `check` spends, in all, measuring inconclusive cases again by default: about a
# dozen more invocations of a few cases at the default suite's settings.
REMEASURE_BUDGET_S = 60.0


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
                   help="measure inconclusive IREE cases again, judged alone, within this "
                        f"many seconds in all (default {REMEASURE_BUDGET_S:g}; 0: never); "
                        "run from the working directory holding results/")
    p.add_argument("--accept-config", type=config_keys, default=(), metavar="KEY[,KEY]",
                   help="judge cases measured at another measurement configuration than "
                        "their golden, these keys accepted as different (one of: "
                        f"{', '.join(KEYS)}); without it such a case could not be judged "
                        "(exit 3). Rebless to make the new configuration the golden")
    add_gate_options(p)
    p.set_defaults(func=gate_command(run))


def config_keys(text: str) -> tuple[str, ...]:
    """--accept-config's keys: measurement configuration keys, comma-separated."""
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in keys if k not in KEYS]
    if unknown or not keys:
        raise argparse.ArgumentTypeError(
            f"unknown measurement configuration key(s) {', '.join(map(repr, unknown))}; "
            f"expected one or more of {', '.join(KEYS)}, comma-separated")
    return keys


def run(args: argparse.Namespace) -> int:
    """Judges the report (stages/gates.py) and prints the gate's lines."""
    gated = check_report(args.report, goldens=args.goldens,
                         require_goldens=args.require_goldens,
                         allow_inconclusive=args.allow_inconclusive,
                         remeasure_budget_s=args.remeasure_budget,
                         settings=gate_settings(args), accept_config=args.accept_config)
    for text in gated.lines:
        print(text)
    return EXIT_CODES[gated.outcome]
