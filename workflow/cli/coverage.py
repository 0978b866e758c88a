"""`benchflow coverage`: the op coverage table of workflow.render.coverage for a report."""

from __future__ import annotations

import argparse
import json


def add_parser(sub) -> None:
    p = sub.add_parser("coverage", help="aten ops per model and pass/fail per backend")
    p.add_argument("--report", default="results/report.json",
                   help="a report.json or a `benchflow run -o` file (default results/report.json)")
    p.add_argument("--ops", action="store_true", help="also list every model's aten ops")
    p.add_argument("--json", action="store_true", help="print the coverage as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from workflow.records.report import read_report
    from workflow.render.coverage import format_coverage, model_coverage

    # A file that is neither a report nor a results file: ReportError, one line, exit 1.
    report = read_report(args.report, results_files=True, case_requires=("workload",))
    cov = model_coverage(report)
    print(json.dumps(cov, indent=1) if args.json else format_coverage(cov, ops=args.ops))
    return 0
