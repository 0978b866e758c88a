"""`benchflow compare`: what regressed, improved or stayed between two reports."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from workflow.cli.options import add_accept_config, add_gate_options, gate_settings
from workflow.records.report import read_report


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="what regressed, improved or stayed between two reports")
    p.add_argument("base", type=Path)
    p.add_argument("new", type=Path)
    p.add_argument("--format", choices=["md", "json"], default="md")
    add_accept_config(p, "compare cases measured at another measurement configuration on "
                         "the two sides")
    add_gate_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from workflow.regression import compare

    result = compare.compare(read_report(args.base), read_report(args.new),
                             gate_settings(args), accept_config=args.accept_config)
    if args.format == "json":
        print(json.dumps(compare.to_json(result), indent=1))
    else:
        from workflow.render.text import printable

        # Error messages and dispatch names are a tool's text: shown, never obeyed by the
        # terminal (JSON escapes control characters itself).
        print(printable(compare.to_markdown(result)))
    return 0
