"""`benchflow check`: the gate; exit 1 naming every case that regressed vs its goldens."""

from __future__ import annotations

import argparse
from pathlib import Path

from workflow.cli.options import add_gate_options, gate_settings
from workflow.errors import ConfigError
from workflow.records.report import read_report


def add_parser(sub) -> None:
    p = sub.add_parser("check", help="exit 1 naming every case that regressed vs its goldens")
    p.add_argument("--report", required=True, type=Path)
    p.add_argument("--goldens", type=Path,
                   help="judge against this goldens directory (default: the report's verdicts)")
    add_gate_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from workflow.regression import gate

    report = read_report(args.report)
    if args.goldens and args.goldens.exists() and not args.goldens.is_dir():
        raise ConfigError([f"{args.goldens}: not a directory: --goldens takes the goldens "
                           "directory (goldens/<sku>.json inside)"])
    if args.goldens:
        report = gate.rejudge(report, args.goldens, asdict(gate_settings(args)))
    found = gate.findings(report)
    for f in found:
        print(f"REGRESSED {f.line()}")
    result = gate.summary(report, found)
    verdicts = result["time_verdicts"]
    compile_only = (f"; {result['compile_only']} compile-only case(s) judged on dispatch "
                    "count and size only (no device: no time)" if result["compile_only"]
                    else "")
    print(f"{'FAIL' if found else 'ok'}: {len(found)} of {len(report['cases'])} case(s) "
          f"regressed; time verdicts {verdicts}{compile_only}")
    return 1 if found else 0
