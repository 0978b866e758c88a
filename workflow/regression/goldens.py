"""Goldens of suite cases: one file per SKU (`goldens/<sku>.json`), keyed by case id.

An entry holds what the blessed report measured: the invocation medians (what the
Mann-Whitney test compares against), their median and CV, the dispatch count, the
binary size rounded up to a stated granularity, and when and at which commit it was
taken. `benchflow bless` writes entries; the case step reads them (verdict.judge).
"""

from __future__ import annotations

import fnmatch
import math
import os
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

from workflow.benchfile import goldens as file_goldens
from workflow.errors import ConfigError
from workflow.records import measurement_config, schemas
from workflow.records.provenance_diff import TRANSIENT
from workflow.records.schemas import schema_problems
from workflow.records.storage import file_sha256, read_json_file, write_json
from workflow.stats import summary as stats
from workflow.stats.enums import Status, status_at
from workflow.stats.verdict import GoldenRef

KIND = "benchflow-goldens"
# 1.1: an entry may hold `explain` (the blessed case's kernels, compile flags and
# provenance), so that `check` names the dispatches behind a regression; 1.2:
# `measurement_config`, so that a case measured otherwise is not judged against it, and
# `run_medians_ms` (one per run of a pooled golden), so that it is judged run by run;
# 1.3: `baseline`, what measures the golden's baseline again beside a later run
# (baselines/keep.py), its files in the artifact store (artifacts.py).
SCHEMA_VERSION = "1.3"
DEFAULT_GRANULARITY = 1024  # bytes; sizes are blessed rounded up to a multiple of it


def goldens_schema() -> dict:
    return schemas.load("goldens")


def golden_path(directory: str | Path, sku: str) -> Path:
    return Path(directory) / f"{sku}.json"


def empty(sku: str) -> dict:
    return {"kind": KIND, "schema_version": SCHEMA_VERSION, "sku": sku, "cases": {}}


def _non_finite(value, where: str):
    """(key path, value) of every NaN or infinite number in `value`: JSON has neither,
    but Python's json module reads the NaN/Infinity literals, and no schema keyword can
    refuse them (NaN compares false with every bound, so NaN > 0 never fails)."""
    if isinstance(value, float) and not math.isfinite(value):
        yield where, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _non_finite(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _non_finite(v, f"{where}[{i}]")


def problems_of(data, source: str) -> list[str]:
    """Every problem of a goldens document, `file: cases.<case id>.<key>: expected ...`:
    the schema (times > 0, at least one invocation, ...), finite numbers, ids of the SKU."""
    problems = schema_problems(data, goldens_schema(), source)
    cases = data.get("cases") if isinstance(data, dict) else None
    for cid, entry in (cases.items() if isinstance(cases, dict) else ()):
        for where, value in _non_finite(entry, f"cases.{cid}"):
            problems.append(f"{source}: {where}: expected a finite number, got {value!r}")
    if not problems:
        for cid in data["cases"]:
            if cid.split("/", 1)[0] != data["sku"]:
                problems.append(f"{source}: cases.{cid}: expected a case of SKU "
                                f"{data['sku']!r} (ids start with the SKU)")
    return problems


def read(path: str | Path, sku: str | None = None) -> dict:
    """A golden file (checked); an empty one for `sku` when it does not exist."""
    path = Path(path)
    # lexists: a dangling link or a link loop is read, and refused as what it is, not
    # taken for "no goldens yet" (which would make every case new and the gate pass).
    if not os.path.lexists(path):
        if sku is None:
            raise ConfigError([f"{path}: file not found"])
        return empty(sku)
    # NaN and Infinity are parsed so that problems_of names the case that holds them.
    data = read_json_file(path, constants_ok=lambda doc: True, unique_keys=True)
    problems = problems_of(data, str(path))
    if problems:
        raise ConfigError(problems)
    return data


def check_dir(directory: str | Path, skus) -> list[str]:
    """Problems of the golden files of these SKUs that exist (before any job runs)."""
    problems = []
    for sku in skus:
        path = golden_path(directory, sku)
        if os.path.lexists(path):
            try:
                read(path)
            except ConfigError as exc:
                problems += exc.problems
    return problems


def entry_config(entry: dict, case_id: str) -> dict:
    """The measurement configuration a golden was measured at: its own (schema 1.2), else
    what its explain.provenance kept (threads, device; schema 1.1), else nothing."""
    if entry.get("measurement_config") is not None:
        return dict(entry["measurement_config"])
    prov = (entry.get("explain") or {}).get("provenance")
    if not prov:
        return {}
    parts = case_id.split("/")
    return measurement_config.of_case({"backend": parts[1] if len(parts) > 1 else None,
                                       "provenance": prov})


def ref_from_entry(entry: dict, source: str, case_id: str = "") -> GoldenRef:
    """A golden file's entry; a compile-only one has no time (median_ms null)."""
    return GoldenRef(source=source, median_ms=entry["median_ms"],
                     config=entry_config(entry, case_id),
                     run_medians_ms=tuple(entry.get("run_medians_ms") or ()) or None,
                     invocation_medians_ms=tuple(entry["invocation_medians_ms"]),
                     tolerance=entry.get("tolerance"), dispatch_count=entry["dispatch_count"],
                     binary_bytes=entry["binary_bytes"],
                     binary_bytes_measured=entry.get("binary_bytes_measured"))


# A benchmark file's golden_size is a ceiling as its runner checks it: size <= golden.
FILE_SIZE_TOLERANCE = 1.0


def ref_from_file_goldens(goldens: dict, source: str) -> GoldenRef | None:
    """A benchmark file's goldens of one SKU (benchfile.parse.BenchmarkFile.goldens), judged by
    the file's own rules where benchflow follows them (stats.verdict.rules)."""
    if not goldens:
        return None
    return GoldenRef(source=source, median_ms=goldens.get("median_ms"),
                     tolerance=goldens.get("tolerance"),
                     dispatch_count=goldens.get("dispatch_count"),
                     binary_bytes=goldens.get("binary_bytes"),
                     size_tolerance=FILE_SIZE_TOLERANCE, origin="sharktank")


def _read_for_lookup(path: str | Path) -> dict:
    """`read`, once per content of the file: a report judges each case against its
    SKU's file (twice, with its run's level), and a file of N cases parsed and checked
    per case made judging a report N^2 (4.5 ms a read at 12 cases). Keyed by the bytes'
    digest, not the name or the mtime (a rewrite within one clock tick keeps both);
    lookup never mutates what it returns. Anything but a regular file goes to read(),
    which refuses it by name."""
    path = Path(path)
    if path.is_symlink() or not path.is_file():
        return read(path)
    return _read_digest(str(path.resolve()), file_sha256(path))


@lru_cache(maxsize=32)
def _read_digest(path: str, digest: str) -> dict:
    return read(path)


def entry_of(golden_file: str | Path, case_id: str) -> dict | None:
    """A case's entry in a golden file, read once per content of the file (as lookup
    reads it); None when the file or the entry is not there."""
    if not os.path.lexists(golden_file):
        return None
    return _read_for_lookup(golden_file)["cases"].get(case_id)


def lookup(case_id: str, golden_file: str | Path | None, file_goldens: dict | None = None,
           file_source: str | None = None) -> GoldenRef | None:
    """A case's golden: its entry in the SKU's golden file (invocation medians: the full
    protocol) wins; else a benchmark file's goldens; else none."""
    if golden_file and os.path.lexists(golden_file):
        entry = _read_for_lookup(golden_file)["cases"].get(case_id)
        if entry:
            ref = ref_from_entry(entry, str(golden_file), case_id)
            if ref.tolerance is None and file_goldens and file_goldens.get("tolerance"):
                # The benchmark file's multiplier still says how much this case may vary.
                ref = replace(ref, tolerance=file_goldens["tolerance"])
            return ref
    return ref_from_file_goldens(file_goldens or {}, file_source or "benchmark file")


def round_up(n: int, granularity: int) -> int:
    return int(math.ceil(n / granularity) * granularity)


def blessable(case: dict) -> bool:
    """A case whose figures can be goldens: ok with a timing, or compile-only with its
    compile section (dispatch count and size, no time)."""
    if case["status"] == Status.COMPILE_ONLY:
        return bool(case.get("compile"))
    return case["status"] == Status.OK and bool(case.get("timing"))


def entry_from_case(case: dict, report: dict, report_path: str, granularity: int,
                    now: str, earlier: list[dict] = ()) -> dict:
    """A golden from a case; `earlier` are the same case's records in earlier reports,
    whose invocation medians are pooled in: invocations of one run share the machine's
    state of that moment, so a golden from several runs also holds the drift between
    runs, which the test must not mistake for a change of the code. A compile-only case
    gives a golden of its dispatch count and size only (`compile_only`, no time)."""
    comp = case.get("compile") or {}
    size = comp.get("binary_bytes")
    prov = report.get("provenance", {})
    if case["status"] == Status.COMPILE_ONLY:
        time_fields = {"median_ms": None, "invocation_medians_ms": [], "cv": None,
                       "noisy": False, "compile_only": True}
        earlier = []
    else:
        t = case["timing"]
        medians = [x for c in earlier for x in c["timing"]["invocation_medians_ms"]]
        medians += t["invocation_medians_ms"]
        pooled = bool(earlier)
        time_fields = {
            "median_ms": stats.median(medians) if pooled else t["median_ms"],
            "invocation_medians_ms": medians,
            "cv": stats.cv(medians) if pooled else t["cv"],
            "noisy": bool(t.get("noisy")) or any(c["timing"].get("noisy") for c in earlier),
            # Each run's median: a golden of several runs judges a later one against
            # their spread (stats/verdict.run_level_verdict).
            **({"run_medians_ms": [c["timing"]["median_ms"] for c in earlier]
                + [t["median_ms"]]} if pooled else {}),
        }
    return {
        **time_fields,
        "dispatch_count": comp.get("dispatch_count"),
        "binary_bytes": round_up(size, granularity) if size is not None else None,
        "binary_bytes_measured": size,
        "size_granularity": granularity,
        "taken_at": report.get("generated_at"),
        "git_sha": prov.get("git_sha"),
        "blessed_at": now,
        "report": report_path,
        "runs": len(earlier) + 1,
        "host": (prov.get("host") or {}).get("name"),
        "versions": prov.get("versions") or {},
        "explain": explain_fields(case, prov),
        **({} if case["status"] == Status.COMPILE_ONLY
           else {"measurement_config": measurement_config.of_case(case)}),
    }


def explain_fields(case: dict, report_provenance: dict) -> dict:
    """What `check` needs of the blessed side to explain a later change
    (regression/explain.against_golden): the case's kernels (a few dozen rows at most),
    compile flags and version, provenance (less the per-run facts), and the host."""
    comp = case.get("compile") or {}
    host = report_provenance.get("host") or {}
    return {"kernels": case.get("kernels"),
            "compile": {"flags": comp.get("flags"),
                        "compiler_version": comp.get("compiler_version")},
            "provenance": {k: v for k, v in (case.get("provenance") or {}).items()
                           if k not in TRANSIENT},
            "host": {"cpu_model": host.get("cpu_model"), "cores": host.get("cores")}}


@dataclass
class BlessPlan:
    """What `bless` would write: per SKU file, the new entries and the old ones they replace."""

    files: dict[str, dict] = field(default_factory=dict)        # path -> new file content
    changes: list[tuple[str, str, dict | None, dict]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (case id, why)
    # (case id, why): earlier reports' runs of a case left out of its pool (another
    # measurement configuration: pooled, they would mix two levels into one golden).
    not_pooled: list[tuple[str, str]] = field(default_factory=list)
    # case id -> the CV of its noisiest run that its SKU's noisy_cv called noisy: a golden
    # of such a run would judge later runs against noise (`bless` refuses it).
    noisy: dict[str, float] = field(default_factory=dict)


def plan_bless(report: dict, report_path: str, directory: str | Path, *, sku: str | None = None,
               cases: str | None = None, granularity: int = DEFAULT_GRANULARITY,
               now: str | None = None, earlier: list[dict] = ()) -> BlessPlan:
    """Goldens from `report` (the newest run: its sizes, dispatches, commit), with the
    invocation medians of the same cases in `earlier` reports pooled in."""
    now = now or datetime.now(UTC).isoformat(timespec="seconds")
    plan = BlessPlan()
    before = [{c["id"]: c for c in r["cases"]} for r in earlier]
    for case in report["cases"]:
        if sku and case["sku"] != sku:
            continue
        if cases and not fnmatch.fnmatchcase(case["id"], cases):
            continue
        if not blessable(case):
            plan.skipped.append((case["id"], f"status {status_at(case)}"))
            continue
        path = str(golden_path(directory, case["sku"]))
        if path not in plan.files:
            plan.files[path] = read(path, case["sku"])
        old = plan.files[path]["cases"].get(case["id"])
        prior = [b[case["id"]] for b in before if case["id"] in b
                 and b[case["id"]]["status"] == Status.OK and b[case["id"]].get("timing")]
        config = measurement_config.of_case(case)
        diffs = [measurement_config.differences(measurement_config.of_case(c), config)
                 for c in prior]
        if any(diffs):
            first = measurement_config.describe_all(next(d for d in diffs if d), "this report")
            plan.not_pooled.append((case["id"], f"{sum(map(bool, diffs))} earlier run(s) at "
                                                f"another configuration not pooled ({first})"))
            prior = [c for c, d in zip(prior, diffs, strict=True) if not d]
        new = entry_from_case(case, report, report_path, granularity, now, prior)
        noisy = [c["timing"]["cv"] for c in [*prior, case]
                 if (c.get("timing") or {}).get("noisy")]
        if noisy:
            plan.noisy[case["id"]] = max(noisy)
        plan.files[path]["cases"][case["id"]] = new
        plan.files[path]["schema_version"] = SCHEMA_VERSION  # entries of 1.1 now
        plan.changes.append((path, case["id"], old, new))
    for data in plan.files.values():
        data["cases"] = dict(sorted(data["cases"].items()))
    return plan


def describe(plan: BlessPlan) -> list[str]:
    """One line per change, as `bless` prints it."""
    lines = []
    for path, cid, old, new in plan.changes:
        size = (f"size {new['binary_bytes']} B ({new['binary_bytes_measured']} B rounded up "
                f"to {new['size_granularity']})" if new["binary_bytes"] is not None
                else "size n/a")
        if new.get("compile_only"):
            timed = "compile-only: no time (not measured where its device was absent)"
        else:
            timed = (f"median {new['median_ms']:.4g} ms (cv {new['cv']:.1%}, "
                     f"{len(new['invocation_medians_ms'])} invocations of {new['runs']} "
                     "run(s))")
        now = f"{timed}, dispatch {_known(new['dispatch_count'])}, {size}"
        if old is None:
            lines.append(f"  + {cid} [{path}]: {now}")
        else:
            if new["median_ms"] is not None and old["median_ms"] is not None:
                change = new["median_ms"] / old["median_ms"] - 1
                median = (f"median {old['median_ms']:.4g} -> {new['median_ms']:.4g} ms "
                          f"({change:+.1%})")
            elif new["median_ms"] is None and old["median_ms"] is not None:
                median = (f"median {old['median_ms']:.4g} ms -> none (compile-only: the time "
                          "golden is dropped)")
            else:
                median = f"median {_ms(old['median_ms'])} -> {_ms(new['median_ms'])}"
            lines.append(f"  ~ {cid} [{path}]: {median}, dispatch "
                         f"{_known(old['dispatch_count'])} -> "
                         f"{_known(new['dispatch_count'])}, size "
                         f"{_known(old['binary_bytes'], ' B')} -> "
                         f"{_known(new['binary_bytes'], ' B')}")
        if new["noisy"]:
            lines.append(f"    ! {cid}: noisy (cv {new['cv']:.1%}); bless a quieter run")
    for cid, why in plan.not_pooled:
        lines.append(f"    ! {cid}: {why}")
    single = sum(1 for *_, new in plan.changes
                 if new["median_ms"] is not None and new["runs"] == 1)
    if single:
        lines.append(f"  note: {single} golden time(s) from one run: a later run is judged "
                     "against its invocations once that run's level is taken out, and a "
                     "level that moved past the tolerance (runs of unchanged code move "
                     "5-20 % as a whole on a shared machine) cannot be judged; bless "
                     "from three or more reports to judge run against runs "
                     "(docs/goldens.md, \"Several runs\")")
    for cid, why in plan.skipped:
        lines.append(f"  - {cid}: not blessed ({why})")
    return lines


def _ms(value: float | None) -> str:
    return "none" if value is None else f"{value:.4g} ms"


def _known(value: int | None, unit: str = "") -> str:
    """A count or size as bless prints it; n/a where the case has none (a torch case has
    no IREE dispatches, a failed compile no module), never Python's None."""
    return "n/a" if value is None else f"{value}{unit}"


def write_plan(plan: BlessPlan) -> None:
    for path, data in plan.files.items():
        write_json(path, data)


def bless_benchmark_files(report: dict, granularity: int, *, sku: str | None = None,
                          cases: str | None = None, write: bool = False) -> list[str]:
    """Records a report's figures as the goldens of the benchmark files its cases came
    from (golden_time_ms, golden_dispatch, golden_size under the case's golden key),
    keeping every other field; returns what changed (written only with write=True, each
    file atomically: workflow.benchfile.goldens)."""
    edits: dict[str, dict] = {}
    lines = []
    for case in report["cases"]:
        prov = case.get("provenance") or {}
        path, key = prov.get("benchmark_file"), prov.get("golden_key")
        if not path or not blessable(case):
            continue
        if (sku and case["sku"] != sku) or (cases and not fnmatch.fnmatchcase(case["id"], cases)):
            continue
        if path not in edits:
            edits[path] = file_goldens.read_for_update(path, case["id"])
        comp = case.get("compile") or {}
        # A compile-only case: its dispatch count and size; the file's time stays.
        new = {"median_ms": round(case["timing"]["median_ms"], 6)
               if case.get("timing") else None,
               "dispatch_count": comp.get("dispatch_count"),
               "binary_bytes": round_up(comp["binary_bytes"], granularity)
               if comp.get("binary_bytes") is not None else None}
        if prov.get("torch_models"):  # a torch_models test: its own unkeyed fields
            for field_name, old, value in file_goldens.set_test_goldens(
                    edits[path], prov["torch_models"], new):
                lines.append(f"  {path}: {field_name} {old} -> {value}")
            continue
        for field_name, old, value in file_goldens.set_goldens(edits[path], key, new):
            lines.append(f"  {path}: {field_name}[{key}] {old} -> {value}")
    if write:
        for path, data in edits.items():
            file_goldens.write_file(path, data)
    return lines
