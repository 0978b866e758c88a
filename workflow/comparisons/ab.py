"""Interleaved A/B comparison of two SKUs on one workload (DESIGN.md, "A/B pairs").

Comparing a run with goldens measured in another session lets the machine's drift
decide: identical code got "improvement" verdicts and a real 1.21x slowdown passed. Here
the two modules are measured in the same job, round by round, each round one fresh
invocation of each in a random order, so drift and load hit both alike and cancel in
the round's ratio new / base. The verdict is a paired test on those ratios, and the
number of rounds adapts: the job stops at a look of a group-sequential plan
(stats/sequential.py) once the verdict is decided or the interval narrow enough, or when
the round or seconds budget is spent, without inflating the false-alarm rate.
"""

from __future__ import annotations

import random
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from workflow.backends.iree import gpu_chip
from workflow.backends.iree import tools as iree
from workflow.errors import ConfigError, StageError
from workflow.jobs.iree import benchmark_run, compile_module, export, iree_invocation, sku_tool
from workflow.jobs.kernels import profiled_kernels
from workflow.measure.pairs import interleave, seed_of
from workflow.measure.plans import ab_plan
from workflow.measure.protocol import Observation
from workflow.records.stage import StageResult
from workflow.records.storage import read_json, write_json
from workflow.regression.explain import explain, interval_noise_ms
from workflow.stats.enums import ABVerdict


def pair_invocation(argv: list[str], timeout: float, log: str, m: dict,
                seed: int) -> Callable[[], Observation]:
    """One side's invocation: a fresh process, its layout randomized as the SKU's cases'
    are (measure/layout.py), observed for disturbance."""
    layout = random.Random(seed) if m["randomize_layout"] else None
    return lambda: iree_invocation(argv, timeout, log, m, layout)


def round_settings(ab: dict, m: dict) -> dict:
    """One invocation of a round: ab.repetitions x ab.min_time_s after
    ab.min_warmup_time_s, each null taking the SKU's own measurement setting. A/B rounds
    are short by default (a fraction of a second each): the pair cancels drift by
    interleaving, and many short rounds decide sooner than few long ones."""
    return {k: m[k] if ab.get(k) is None else ab[k]
            for k in ("repetitions", "min_time_s", "min_warmup_time_s")}


def _failed(row: dict, stage: str | None, error: str, out: str) -> dict:
    result = {**row, "verdict": ABVerdict.FAILED, "failed_stage": stage, "error": error}
    write_json(out, result)
    return result


def build_modules(*, base: str, new: str, workload: str, skus: dict, spec: dict,
                  timeouts: dict, log: str) -> tuple[dict[str, str], StageResult | None]:
    """The workload's export (the shared, content-keyed one: reused when a batch or another
    pair made it) and both SKUs' modules, compiled into this pair's own files
    (paths.AB_COMPILE_DIR). Returns {sku: module} and None, or what failed: a stage result
    whose error names the SKU (the export's names the workload)."""
    from workflow.paths import (
        AB_COMPILE_META,
        AB_COMPILE_VMFB,
        EXPORT_INPUTS,
        EXPORT_META,
        EXPORT_MLIR,
        EXPORT_REFERENCE,
    )

    mlir, meta = EXPORT_MLIR.format(workload=workload), EXPORT_META.format(workload=workload)
    exported = export(spec=spec, timeout=timeouts["export_s"], mlir=mlir,
                      inputs=EXPORT_INPUTS.format(workload=workload),
                      reference=EXPORT_REFERENCE.format(workload=workload), meta=meta, log=log)
    if not exported.ok:
        exported.error = f"{workload}: {exported.error}"
        return {}, exported
    modules = {}
    for side, sku in (("base", base), ("new", new)):
        where = {"base": base, "new": new, "workload": workload, "side": side}
        vmfb, compile_meta = AB_COMPILE_VMFB.format(**where), AB_COMPILE_META.format(**where)
        Path(vmfb).parent.mkdir(parents=True, exist_ok=True)
        compiled = compile_module(mlir=mlir, export_meta=meta, sku=skus[sku],
                                  timeout=timeouts["compile_s"], vmfb=vmfb,
                                  meta=compile_meta, log=log)
        if not compiled.ok:
            compiled.error = f"{sku}: {compiled.error}"
            return {}, compiled
        modules[sku] = vmfb
    return modules, None


def _absent_side(skus: dict, sides: tuple[str, str]) -> str | None:
    """Why a pair cannot be timed here: the first side whose device this machine lacks (a
    GPU target without the GPU), named; None when both are here. Asked before the export
    and the compiles, which would be made for nothing (issue 47): a pair is timed where
    both devices are, never compiled only."""
    for sku in sides:
        absent = iree.device_absent_reason(skus[sku]["iree"]["device"])
        if absent:
            return (f"{sku}: {absent} (an A/B times both SKUs on the machine that runs it; "
                    "nothing was built)")
    return None


def compare_pair(*, base: str, new: str, workload: str, skus: dict, spec: dict, ab: dict,
                 timeouts: dict, out: str, log: str) -> dict:
    """The A/B row of one workload: the two SKUs' modules (build_modules: no batch job, no
    full measurement of either SKU first) interleaved in rounds of round_settings'
    invocations. A module that failed to export, compile or cannot run here gives a
    `failed` row naming the SKU and the stage, never a lost pair."""
    from workflow.paths import EXPORT_INPUTS, EXPORT_META

    row = {"base": base, "new": new, "workload": workload, "kind": "iree"}
    with open(log, "a", encoding="utf-8", errors="replace") as fh:
        fh.write(f"A/B {base} -> {new} on {workload}\n")
    # A side whose target_chip is `auto` is compiled for this machine's GPU, chosen here
    # where the pair is measured (gpu_chip.resolve_auto_chip); with no chip to choose the
    # row fails at compile, naming the SKU and why.
    skus = dict(skus)
    for sku in (base, new):
        skus[sku], choice = gpu_chip.resolve_auto_chip(skus[sku])
        if choice is not None:
            with open(log, "a", encoding="utf-8", errors="replace") as fh:
                fh.write(f"{sku}: target_chip {gpu_chip.AUTO_CHIP}: {choice.reason}\n")
            if choice.chip is None:
                return _failed(row, "compile", f"{sku}: target_chip {gpu_chip.AUTO_CHIP!r}: "
                               f"{choice.reason}", out)
    absent = _absent_side(skus, (base, new))
    if absent:
        return _failed(row, "run", absent, out)
    modules, failed = build_modules(base=base, new=new, workload=workload, skus=skus,
                                    spec=spec, timeouts=timeouts, log=log)
    if failed is not None:
        return _failed(row, failed.failed_stage, failed.error, out)
    timeout = timeouts["run_s"]
    dtypes = [i["dtype"] for i in read_json(EXPORT_META.format(workload=workload))["inputs"]]
    invocation = {sku: round_settings(ab, skus[sku]["measurement"]) for sku in (base, new)}
    with tempfile.TemporaryDirectory() as tmp:
        args = iree.write_input_files(EXPORT_INPUTS.format(workload=workload), dtypes,
                                      Path(tmp))
        argvs = {sku: iree.benchmark_argv(
            sku_tool(skus[sku], "benchmark_tool"), modules[sku], "main", args, skus[sku],
            repetitions=r["repetitions"], warmup_s=r["min_warmup_time_s"],
            min_time=f"{r['min_time_s']:g}s") for sku, r in invocation.items()}
        try:
            # One untimed call of each first: the first invocation of a fresh module
            # pays page faults and caches that the rounds should not.
            for sku in (base, new):
                benchmark_run(argvs[sku], timeout, log)
            seed = seed_of(base, new, workload)
            measured = interleave(
                pair_invocation(argvs[base], timeout, log, skus[base]["measurement"], seed),
                pair_invocation(argvs[new], timeout, log, skus[new]["measurement"], seed + 1),
                ab_plan(ab), budget_s=ab["budget_s"], seed=seed, max_retakes=ab["max_retakes"])
            profiles = pair_profiles(argvs, base, new, skus, timeout, log)
        except StageError as exc:
            return _failed(row, exc.stage, exc.message, out)
    result = {**row, **measured, "commands": argvs, "invocation": invocation}
    if profiles is not None:
        result.update(kernels=profiles, attribution=row_attribution(result, profiles, skus))
    write_json(out, result)
    return result


def pair_profiles(argvs: dict, base: str, new: str, skus: dict, timeout: float,
              log: str) -> dict | None:
    """{"base": kernels, "new": kernels} after the rounds (never timed): one profiling
    invocation of each side's round argv with its SKU's measurement.profile_calls, in the
    case record's shape (jobs/kernels.py; a tool's failure is the side's `error`, never
    the row's). None when either SKU has measurement.profile false (a one-sided profile
    explains nothing)."""
    m = {sku: skus[sku]["measurement"] for sku in (base, new)}
    if not all(x["profile"] for x in m.values()):
        return None
    return {side: profiled_kernels(argvs[sku], m[sku], timeout, log)
            for side, sku in (("base", base), ("new", new))}


def row_attribution(row: dict, profiles: dict, skus: dict) -> dict:
    """The row's explanation (regression/explain.py). Totals: the median of the base
    side's round times, and that x the row's ratio for the new side, so that the
    attribution's total change is the change the row measured (the ratio is the median
    of the per-round ratios, not the ratio of the two sides' medians); noise: what the
    row's interval leaves open. What changed: the two SKUs' compile flags, devices and
    tools."""
    sides = {side: {"sku": row[side], "kernels": profiles[side],
                    "compile": {"flags": iree.compile_flags(skus[row[side]])},
                    "provenance": {"iree_device": skus[row[side]]["iree"]["device"],
                                   "benchmark_tool": row["commands"][row[side]][0]}}
             for side in ("base", "new")}
    return attribution_of(row, sides["base"], sides["new"])


def attribution_of(row: dict, base: dict, new: dict) -> dict:
    """An A/B row's explanation of its two sides (record-shaped: kernels, compile,
    provenance): the median of the base side's round times and that x the row's ratio as
    totals, the part of the change the row's interval leaves open as noise."""
    base_ms = statistics.median(row["base_ms"])
    ci = row.get("ci95") or row.get("ci")
    decided = row["verdict"] in (ABVerdict.REGRESSION, ABVerdict.IMPROVEMENT)
    return explain(base, new, base_ms, base_ms * row["ratio"], decided=decided,
                   noise_ms=interval_noise_ms(base_ms, row["ratio"], ci))


def aggregate(rows: list[str], out: str, *, suite_name: str, config_hash: str,
              repair: str | None = None) -> dict:
    """Every A/B row into results/ab.json, validated against its schema before writing.
    A suite without ab_pairs has no rows: bad input, never an empty file that a gate
    reading it takes for "nothing regressed". `repair`: the note that made the rule
    rerun over a damaged ab.json (ab_repair), kept in the file."""
    from datetime import UTC, datetime

    from workflow.records.ab import SCHEMA_VERSION, validate_ab

    if not rows:
        raise ConfigError([f"{suite_name}: ab_pairs: none declared, so {out} would hold no "
                           "comparison; expected at least one {base, new} pair of SKUs"])

    doc = {"schema_version": SCHEMA_VERSION, "suite_name": suite_name,
           "config_hash": config_hash,
           "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
           "pairs": [read_json(p) for p in rows]}
    if repair is not None:
        doc["repair"] = repair
    validate_ab(doc)
    write_json(out, doc)
    return doc


def ab_damage(ab_path: str | Path, row_paths: list[str]) -> str | None:
    """Why ab.json no longer holds its rows' records, in one line (malformed: not JSON,
    cut, retyped; or a row edited, dropped or added: records/ab.differences), or None
    when it does, or when that cannot be told yet (no ab.json, or a record not made:
    then its pair's job and the `ab` rule run anyway)."""
    import os

    from workflow.records.ab import differences, read_ab

    if not os.path.lexists(ab_path):
        return None
    records = []
    for path in row_paths:
        try:
            record = read_json(path)
        except (OSError, ValueError, ConfigError):
            return None
        records.append((path, record))
    try:
        doc = read_ab(ab_path)
    except ConfigError as exc:
        return exc.problems[0]
    return differences(ab_path, doc, records)


def ab_repair(ab_path: str | Path, row_paths: list[str], *,
              check: bool) -> tuple[str | None, str | None]:
    """The `ab` rule's repair note (a param: a new note reruns the rule) and the line to
    print, if any. Snakemake alone would not rebuild an ab.json edited after it was
    written, and the gate and the renders would take the edit for the measurement: so
    at load (check: in the process that plans) a damaged one (ab_damage) gets a new note
    and is built again from the records. Else the note is the one the file keeps, so
    that a finished run reruns nothing."""
    import uuid

    from workflow.records.ab import read_ab
    from workflow.render.text import printable

    problem = ab_damage(ab_path, row_paths) if check else None
    if problem is not None:
        line = f"benchflow: {problem}; it is built again from the records"
        return f"{uuid.uuid4().hex}: {problem}", printable(line)
    try:
        return read_ab(ab_path).get("repair"), None
    except ConfigError:
        return None, None
