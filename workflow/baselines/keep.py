"""What `bless` adds to each golden so that `check` can measure its baseline again: the
case's identity (identity.py), the side a pair measures, and its files by content in the
artifact store (baselines/artifacts.py): an IREE case's compiled module and inputs, a
torch case's model files. Measured again beside a later run, the blessed module and the
new one share the machine's state of that moment, and their ratio is the code's, not the
drift between two sessions (docs/goldens.md, "What a golden keeps").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from workflow.baselines import artifacts
from workflow.baselines.identity import NotKept, load_suite, made, results_root
from workflow.records.report import read_report


@dataclass
class Kept:
    """The baselines a bless plan holds: the files to store (path, digest), the bytes
    the store does not hold yet, and the cases kept without one (case id, why)."""

    store: Path
    copies: list[tuple[Path, str]] = field(default_factory=list)
    new_bytes: int = 0
    total_bytes: int = 0
    cases: int = 0
    without: list[tuple[str, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"baselines: {self.cases} case(s) keep what measures them again, "
               f"{_size(self.total_bytes)} in {len(self.copies)} artifact(s), "
               f"{_size(self.new_bytes)} new in {self.store}"]
        out += [f"    ! {cid}: numbers only, no baseline ({why})" for cid, why in self.without]
        return out


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB"


def store_ref(goldens_dir: Path, store: Path) -> str:
    """How an entry names its store: relative to the goldens directory when inside it
    (goldens and artifacts move together), else absolute."""
    try:
        return os.path.relpath(store.resolve(), goldens_dir.resolve()) \
            if store.resolve().is_relative_to(goldens_dir.resolve()) else str(store.resolve())
    except ValueError:
        return str(store.resolve())


def store_of(golden_file: Path, baseline: dict) -> Path:
    """The artifact store a golden entry names, resolved against its goldens directory."""
    ref = Path(baseline.get("store") or artifacts.DEFAULT_NAME)
    return ref if ref.is_absolute() else golden_file.parent / ref


def attach(plan, report_path: Path, goldens_dir: Path, store: Path | None) -> Kept:
    """Adds `baseline` to each timed entry of a bless plan (regression/goldens.BlessPlan)
    from the newest report's run; a case whose baseline cannot be kept keeps its numbers
    and is listed with why."""
    store = store or goldens_dir / artifacts.DEFAULT_NAME
    kept = Kept(store)
    report = read_report(report_path)
    by_id = {c["id"]: c for c in report["cases"]}
    root = results_root(report_path)
    try:
        suite, suite_why = load_suite(report), None
    except NotKept as exc:
        suite, suite_why = None, str(exc)
    seen: set[str] = set()
    for _path, cid, _old, new in plan.changes:
        if new.get("compile_only"):
            continue
        try:
            if suite is None:
                raise NotKept(suite_why)
            case = made(by_id[cid], report, root, suite)
        except NotKept as exc:
            kept.without.append((cid, str(exc)))
            continue
        files = {}
        for role, path in case.files.items():
            digest, size = artifacts.planned(path)
            files[role] = {"sha256": digest, "bytes": size}
            kept.total_bytes += size
            if digest not in seen:
                seen.add(digest)
                kept.copies.append((path, digest))
                if not artifacts.path_of(store, digest).is_file():
                    kept.new_bytes += size
        new["baseline"] = {"identity": case.identity, "side": case.side, "files": files,
                           "store": store_ref(goldens_dir, store)}
        kept.cases += 1
    return kept


def write(kept: Kept) -> int:
    """Stores the kept files (before the goldens that name them are written); the bytes
    added."""
    return sum(artifacts.put(kept.store, path, digest) for path, digest in kept.copies)
