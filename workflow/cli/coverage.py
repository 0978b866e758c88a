"""`benchflow coverage`: the op coverage table of workflow.render.coverage for a report."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("coverage", help="aten ops per model and pass/fail per backend")
    p.add_argument("--report", default="results/report.json",
                   help="a report.json or a `benchflow run -o` file (default results/report.json)")
    p.add_argument("--ops", action="store_true", help="also list every model's aten ops")
    p.add_argument("--json", action="store_true", help="print the coverage as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from workflow.records.storage import read_json
    from workflow.render.coverage import format_coverage, model_coverage

    try:
        report = read_json(args.report)
    except (OSError, json.JSONDecodeError) as exc:
        print(f"benchflow coverage: cannot read {args.report}: {exc}", file=sys.stderr)
        return 1
    if not isinstance(report, dict) or not isinstance(report.get("cases"), list):
        print(f"benchflow coverage: {args.report} has no `cases` list", file=sys.stderr)
        return 1
    cov = model_coverage(report)
    print(json.dumps(cov, indent=1) if args.json else format_coverage(cov, ops=args.ops))
    return 0
