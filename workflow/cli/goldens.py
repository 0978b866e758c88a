"""`benchflow bless | compare | check | benchmarks`: goldens, the gate, benchmark files."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from workflow.paths import REPO_ROOT
from workflow.records.storage import read_json


def cmd_bless(args: argparse.Namespace) -> int:
    from workflow.regression import goldens

    # Several reports: the last is the newest; the others' invocation medians are pooled.
    *earlier_paths, newest = args.report
    report = read_json(newest)
    earlier = [read_json(p) for p in earlier_paths]
    for path, r in zip(earlier_paths, earlier, strict=True):
        sha, new_sha = r["provenance"].get("git_sha"), report["provenance"].get("git_sha")
        if sha != new_sha:
            print(f"warning: {path} was measured at {sha}, {newest} at {new_sha}: pooling "
                  "runs of different commits", file=sys.stderr)
    plan = goldens.plan_bless(report, str(newest), args.goldens, sku=args.sku,
                              cases=args.cases, granularity=args.size_granularity,
                              earlier=earlier)
    lines = goldens.describe(plan)
    file_lines = (goldens.bless_benchmark_files(report, args.size_granularity, sku=args.sku,
                                                cases=args.cases, write=args.yes)
                  if args.benchmark_files else [])
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


def _settings(args: argparse.Namespace):
    from workflow.stats.verdict import Settings

    return Settings(tolerance=args.tolerance, size_tolerance=args.size_tolerance,
                    p_value=args.p_value)


def cmd_compare(args: argparse.Namespace) -> int:
    from workflow.regression import compare

    result = compare.compare(read_json(args.base), read_json(args.new), _settings(args))
    if args.format == "json":
        print(json.dumps(compare.to_json(result), indent=1))
    else:
        print(compare.to_markdown(result))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from workflow.regression import gate

    report = read_json(args.report)
    if args.goldens:
        s = _settings(args)
        report = gate.rejudge(report, args.goldens, asdict(s))
    found = gate.findings(report)
    for f in found:
        print(f"REGRESSED {f.line()}")
    verdicts = gate.summary(report, found)["time_verdicts"]
    print(f"{'FAIL' if found else 'ok'}: {len(found)} of {len(report['cases'])} case(s) "
          f"regressed; time verdicts {verdicts}")
    return 1 if found else 0


def cmd_benchmarks(args: argparse.Namespace) -> int:
    """Lists (or runs) the benchmark files a suite selects, with sharktank's options."""
    from workflow.suite.load import load
    from workflow.suite.sharktank import attach

    override = {k: v for k, v in {
        "dir": args.dir, "models": args.model, "filename": args.filename, "skus": args.sku,
        "backends": args.backend}.items() if v is not None}
    suite = load(args.configfile, {"benchmark_files": override} if override else None)
    sel = attach(suite)
    for case in sel.cases:
        print(f"  {case.id}  ({case.file.path})")
    for fid, sku, why in sel.skipped:
        print(f"  skipped {fid} on {sku}: {why}")
    print(f"{len(sel.cases)} benchmark case(s) selected")
    if not args.run:
        return 0
    # Snakemake parses --config values as YAML with strings only; JSON is such YAML.
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"),
           "--cores", str(args.cores), args.target]
    for f in args.configfile or []:
        cmd += ["--configfile", str(f)]
    if override:
        cmd += ["--config", "benchmark_files=" + json.dumps(override)]
    if args.dry_run:
        cmd.append("-n")
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd).returncode


def _gate_options(p: argparse.ArgumentParser) -> None:
    from workflow.stats.verdict import Settings

    d = Settings()
    p.add_argument("--tolerance", type=float, default=d.tolerance,
                   help=f"time ratio beyond which a case may regress (default {d.tolerance})")
    p.add_argument("--size-tolerance", type=float, default=d.size_tolerance,
                   help=f"binary size ratio that regresses (default {d.size_tolerance})")
    p.add_argument("--p-value", type=float, default=d.p_value,
                   help=f"significance threshold (default {d.p_value})")


def add_parsers(sub) -> None:
    from workflow.regression.goldens import DEFAULT_GRANULARITY

    p = sub.add_parser("bless", help="write goldens from a report (dry run without --yes)")
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
    p.set_defaults(func=cmd_bless)

    p = sub.add_parser("compare", help="what regressed, improved or stayed between two reports")
    p.add_argument("base", type=Path)
    p.add_argument("new", type=Path)
    p.add_argument("--format", choices=["md", "json"], default="md")
    _gate_options(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("check", help="exit 1 naming every case that regressed vs its goldens")
    p.add_argument("--report", required=True, type=Path)
    p.add_argument("--goldens", type=Path,
                   help="judge against this goldens directory (default: the report's verdicts)")
    _gate_options(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("benchmarks", help="list or run the sharktank-format benchmark files a "
                                          "suite selects (run_benchmarks.py's options)")
    p.add_argument("--configfile", nargs="*", default=None, help="suite files (default suite)")
    p.add_argument("--dir", help="directory of benchmark files")
    p.add_argument("--model", nargs="+", help="model directories (globs)")
    p.add_argument("--filename", help="glob on file names without .json")
    p.add_argument("--sku", nargs="+", help="suite SKUs that run them")
    p.add_argument("--backend", nargs="+", help="file-name backend suffixes (e.g. cpu)")
    p.add_argument("--run", action="store_true", help="run them: snakemake TARGET")
    p.add_argument("--target", default="results/report.json")
    p.add_argument("--cores", default="all")
    p.add_argument("-n", "--dry-run", action="store_true", help="with --run: snakemake -n")
    p.set_defaults(func=cmd_benchmarks)
