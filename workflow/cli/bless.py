"""`benchflow bless`: write goldens (and golden fields of benchmark files) from reports."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub) -> None:
    from workflow.regression.goldens import DEFAULT_GRANULARITY

    p = sub.add_parser("bless", help="write goldens from a report (dry run without --yes); "
                                     "a compile-only case blesses its dispatch count and "
                                     "size, no time")
    p.add_argument("--report", required=True, type=Path, nargs="+",
                   help="the report; several: the last is the newest, and every one's "
                        "invocation medians are pooled into the goldens")
    p.add_argument("--goldens", required=True, type=Path, help="goldens directory")
    p.add_argument("--sku", help="only this SKU's cases")
    p.add_argument("--cases", help="only case ids matching this glob")
    p.add_argument("--size-granularity", type=int, default=DEFAULT_GRANULARITY,
                   help=f"round sizes up to a multiple of this (default {DEFAULT_GRANULARITY})")
    p.add_argument("--benchmark-files", action="store_true",
                   help="also record golden_time_ms/golden_dispatch/golden_size in the "
                        "benchmark files the report's cases came from")
    p.add_argument("--yes", action="store_true", help="write (default: print what would change)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Plans the goldens (stages/bless.py), prints them and, with --yes, writes them."""
    from workflow.regression import goldens
    from workflow.stages.bless import plan_bless

    blessing = plan_bless(args.report, args.goldens, sku=args.sku, cases=args.cases,
                          granularity=args.size_granularity,
                          benchmark_files=args.benchmark_files, write=args.yes,
                          warn=lambda text: print(text, file=sys.stderr))
    plan, lines, file_lines = blessing.plan, blessing.lines, blessing.file_lines
    print(f"bless {', '.join(map(str, args.report))} -> {args.goldens} (sizes rounded up to "
          f"{args.size_granularity} B):")
    print("\n".join(lines) if lines else "  no case matches")
    if file_lines:
        print("benchmark files:")
        print("\n".join(file_lines))
    if not plan.changes and not file_lines:
        return 1  # nothing matched: most likely a wrong --sku or --cases
    if not args.yes:
        print(f"dry run: nothing written; --yes writes {len(plan.changes)} golden(s) to "
              f"{len(plan.files)} file(s)" + (" and the benchmark files" if file_lines else ""))
        return 0
    goldens.write_plan(plan)
    print(f"wrote {len(plan.changes)} golden(s) to {', '.join(sorted(plan.files)) or 'no file'}")
    return 0
