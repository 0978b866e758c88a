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
    # The cases too noisy to be goldens, a line each: the case, its CV and the limit.
    noisy: list[str]
    # What measures each golden's baseline again (baselines/keep.Kept); None:
    # numbers only (--numbers-only).
    kept: object = None


def plan_bless(reports: list[Path], goldens_dir: Path, *, sku: str | None, cases: str | None,
               granularity: int, benchmark_files: bool, write: bool,
               warn: Callable[[str], None], allow_noisy: bool = False,
               baselines: bool = True, artifacts: Path | None = None) -> Blessing:
    """The goldens of `reports` (the last the newest; every one's invocation medians
    pooled) planned for goldens_dir; with benchmark_files the files' golden fields too,
    written when `write`, unless a case is noisy and not `allow_noisy`. Raises
    ConfigError for a goldens_dir that is not a directory; warn(line) as soon as reports
    of different commits are pooled. `baselines`: each timed golden also keeps what
    measures it again (baselines/keep.py), its files in `artifacts` (default
    <goldens_dir>/artifacts)."""
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
    kept = None
    if baselines:
        from workflow.baselines import keep

        kept = keep.attach(plan, newest, goldens_dir, artifacts)
    lines = goldens.describe(plan) + (kept.lines() if kept and plan.changes else [])
    noisy = noisy_lines(plan, report)
    file_lines = (goldens.bless_benchmark_files(report, granularity, sku=sku, cases=cases,
                                                write=write and (allow_noisy or not noisy))
                  if benchmark_files else [])
    return Blessing(plan, lines, file_lines, noisy, kept)


def noisy_lines(plan, report: dict) -> list[str]:
    """`<case>: cv 29.0% above its noise limit 10% (skus.<sku>.measurement.noisy_cv)`
    for each case the plan found noisy."""
    limits = noise_limits(report)
    lines = []
    for cid, cv in plan.noisy.items():
        sku = cid.split("/", 1)[0]
        limit = (f"the noise limit {limits[sku] * 100:g}%" if limits.get(sku) is not None
                 else "its SKU's noise limit")  # the suite is gone, or names no such SKU
        lines.append(f"{cid}: cv {cv:.1%} above {limit} (skus.{sku}.measurement.noisy_cv)")
    return lines


def noise_limits(report: dict) -> dict[str, float]:
    """Each SKU's noisy_cv in the suite the report names (its files as they are now,
    merged), the schema's default where a SKU sets none; empty when they cannot be read.
    A case record says whether it was noisy, not the limit it was held to."""
    from workflow.suite.defaults import measurement_defaults
    from workflow.suite.schema import deep_merge, read_yaml

    source = (report.get("provenance") or {}).get("config_source") or ""
    merged: dict = {}
    try:
        for path in filter(None, source.split(", ")):
            data = read_yaml(path)
            merged = deep_merge(merged, data if isinstance(data, dict) else {})
    except (ConfigError, OSError):
        return {}
    limits = {}
    skus = merged.get("skus") if isinstance(merged.get("skus"), dict) else {}
    for name, sku in skus.items():
        m = (sku or {}).get("measurement") if isinstance(sku, dict | None) else None
        limit = (m or {}).get("noisy_cv", measurement_defaults()["noisy_cv"]) \
            if isinstance(m, dict | None) else None
        if isinstance(limit, int | float) and not isinstance(limit, bool):
            limits[name] = limit
    return limits
