"""`benchflow bless`: write goldens (and golden fields of benchmark files) from reports."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The exit status of a bless refused for noisy cases: 3, as a gate that could not judge
# (cli/options.EXIT_CODES), for a golden of noise would leave later runs unjudgeable.
NOISY_EXIT = 3


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
    p.add_argument("--allow-noisy", action="store_true",
                   help="bless cases too noisy to be goldens as well (their CV above their "
                        "SKU's measurement.noisy_cv); without it --yes refuses them, exit "
                        f"{NOISY_EXIT}, and writes nothing")
    p.add_argument("--numbers-only", action="store_true",
                   help="keep only the numbers: no module, inputs or model files to measure "
                        "the baseline again, so `check` judges these goldens across runs "
                        "as measured (docs/goldens.md, \"What a golden keeps\")")
    p.add_argument("--artifacts", type=Path, metavar="DIR",
                   help="keep the baselines' files (IREE modules and inputs, torch model "
                        "files, by content) in DIR instead of <goldens>/artifacts; the "
                        "goldens name it")
    p.add_argument("--yes", action="store_true", help="write (default: print what would change)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Plans the goldens (commands/bless.py), prints them and, with --yes, writes them."""
    from workflow.commands.bless import plan_bless
    from workflow.regression import goldens

    blessing = plan_bless(args.report, args.goldens, sku=args.sku, cases=args.cases,
                          granularity=args.size_granularity,
                          benchmark_files=args.benchmark_files, write=args.yes,
                          warn=lambda text: print(text, file=sys.stderr),
                          allow_noisy=args.allow_noisy, baselines=not args.numbers_only,
                          artifacts=args.artifacts)
    plan, lines, file_lines = blessing.plan, blessing.lines, blessing.file_lines
    print(f"bless {', '.join(map(str, args.report))} -> {args.goldens} (sizes rounded up to "
          f"{args.size_granularity} B):")
    print("\n".join(lines) if lines else "  no case matches")
    if file_lines:
        print("benchmark files:")
        print("\n".join(file_lines))
    if not plan.changes and not file_lines:
        return 1  # nothing matched: most likely a wrong --sku or --cases
    if blessing.noisy and not args.allow_noisy:
        _refuse_noisy(blessing.noisy, args.yes)
        if args.yes:
            return NOISY_EXIT
    elif blessing.noisy:
        print(f"--allow-noisy: blessing {len(blessing.noisy)} noisy case(s) all the same:")
        print("\n".join(f"  {line}" for line in blessing.noisy))
    if not args.yes:
        print(f"dry run: nothing written; --yes writes {len(plan.changes)} golden(s) to "
              f"{len(plan.files)} file(s)" + (" and the benchmark files" if file_lines else ""))
        return 0
    if blessing.kept is not None:
        from workflow.baselines import keep

        added = keep.write(blessing.kept)  # before the goldens that name them
        print(f"stored {added / 2**20:.1f} MiB of baseline artifacts in {blessing.kept.store}")
    goldens.write_plan(plan)
    print(f"wrote {len(plan.changes)} golden(s) to {', '.join(sorted(plan.files)) or 'no file'}")
    return 0


def _refuse_noisy(lines: list[str], write: bool) -> None:
    """On stderr: the noisy cases, each with its CV and the limit, and the ways on. A
    golden of a noisy run judges every later run against that noise: slowdowns within
    it go unseen, and the gate answers `inconclusive` where it could have judged."""
    head = "bless: refused, nothing written" if write else "bless: --yes would refuse this"
    print(f"{head}: {len(lines)} case(s) too noisy to be goldens:", file=sys.stderr)
    for line in lines:
        print(f"  {line}", file=sys.stderr)
    print("  bless a quieter run (several reports pool their runs), leave them out with "
          "--cases, or bless them all the same with --allow-noisy", file=sys.stderr)
