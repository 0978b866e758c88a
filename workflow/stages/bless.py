"""`benchflow bless`'s work (cli/bless.py prints what `plan_bless` returns, then, with
--yes, writes its plan with regression/goldens.write_plan): the reports read, the goldens
directory checked, the goldens to write planned (regression/goldens.py) and, with
--benchmark-files, the benchmark files' golden fields blessed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workflow.errors import ConfigError
from workflow.records.report import read_report


@dataclass
class Blessing:
    plan: object                 # regression.goldens.BlessPlan
    lines: list[str]             # what would change in the goldens, one line each
    file_lines: list[str]        # the benchmark files' changes (--benchmark-files)


def plan_bless(reports: list[Path], goldens_dir: Path, *, sku: str | None, cases: str | None,
               granularity: int, benchmark_files: bool, write: bool,
               warn: Callable[[str], None]) -> Blessing:
    """The goldens of `reports` (the last the newest; every one's invocation medians
    pooled) planned for goldens_dir; with benchmark_files the files' golden fields too,
    written when `write`. Raises ConfigError for a goldens_dir that is not a directory;
    warn(line) as soon as reports of different commits are pooled."""
    from workflow.regression import goldens

    if goldens_dir.exists() and not goldens_dir.is_dir():
        raise ConfigError([f"{goldens_dir}: not a directory: --goldens takes the goldens "
                           "directory (goldens/<sku>.json inside)"])
    # Several reports: the last is the newest; the others' invocation medians are pooled.
    *earlier_paths, newest = reports
    report = read_report(newest)
    earlier = [read_report(p) for p in earlier_paths]
    for path, r in zip(earlier_paths, earlier, strict=True):
        sha, new_sha = r["provenance"].get("git_sha"), report["provenance"].get("git_sha")
        if sha != new_sha:
            warn(f"warning: {path} was measured at {sha}, {newest} at {new_sha}: pooling "
                 "runs of different commits")
    plan = goldens.plan_bless(report, str(newest), goldens_dir, sku=sku, cases=cases,
                              granularity=granularity, earlier=earlier)
    lines = goldens.describe(plan)
    file_lines = (goldens.bless_benchmark_files(report, granularity, sku=sku, cases=cases,
                                                write=write)
                  if benchmark_files else [])
    return Blessing(plan, lines, file_lines)
