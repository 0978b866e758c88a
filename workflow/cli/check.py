"""`benchflow check`: the gate. Exit 0 when every case was judged and none regressed, 1
naming every case that regressed vs its goldens, 2 for bad input, 3 when a case could not
be judged (README, "Exit codes of the gates"); inconclusive IREE cases are measured again
first, within --remeasure-budget seconds."""

from __future__ import annotations

import argparse
from pathlib import Path

from workflow.cli.options import (
    EXIT_CODES,
    HEADS,
    add_allow_inconclusive,
    add_gate_options,
    gate_command,
    gate_settings,
)
from workflow.errors import ConfigError
from workflow.records.report import read_report
from workflow.stats.enums import Status, Verdict

# Seconds `check` spends, in all, measuring inconclusive cases again by default: about a
# dozen more invocations of a few cases at the default suite's settings.
REMEASURE_BUDGET_S = 60.0

# Why a case not judged counted as ok, by its kind (regression.gate.NotJudged.kind).
HINTS = {Verdict.NO_GOLDEN: "--require-goldens fails it",
         Verdict.INCONCLUSIVE: "--allow-inconclusive",
         Status.SKIPPED: "it did not run here by design"}


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
    add_gate_options(p)
    p.set_defaults(func=gate_command(run))


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from workflow.regression import gate
    from workflow.stages.remeasure import remeasure_inconclusive

    report = read_report(args.report)
    if args.goldens:
        problems = gate.goldens_dir_problems(report, args.goldens, "--goldens", strict=True)
        if problems:
            raise ConfigError(problems)
        report = gate.rejudge(report, args.goldens, asdict(gate_settings(args)))
    report, remeasured = remeasure_inconclusive(
        report, budget_s=args.remeasure_budget, gate_config=asdict(gate_settings(args)),
        goldens_dir=args.goldens)
    a = gate.assess(report, require_goldens=args.require_goldens,
                    allow_inconclusive=args.allow_inconclusive)
    for r in remeasured:
        print(r.line())
    for f in a.regressed:
        print(f"REGRESSED {f.line()}")
    for nj in a.unjudged:
        print(f"COULD NOT JUDGE {nj.line()}")
    for nj in a.not_judged:
        print(f"NOT JUDGED {nj.line()} (counted as ok: {HINTS.get(nj.kind, nj.kind)})")
    result = gate.summary(report, a)
    n = len(report["cases"])
    compile_only = (f"; {result['compile_only']} compile-only case(s) judged on dispatch "
                    "count and size only (no device: no time)" if result["compile_only"]
                    else "")
    unjudged = f", {len(a.unjudged)} could not be judged" if a.unjudged else ""
    print(f"{HEADS[a.outcome]}: {len(a.regressed)} of {n} case(s) regressed{unjudged}, {a.judged} "
          f"judged; time verdicts {result['time_verdicts']}{compile_only}")
    return EXIT_CODES[a.outcome]
