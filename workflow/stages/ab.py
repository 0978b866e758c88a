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
import tempfile
from collections.abc import Callable
from pathlib import Path

from workflow.backends.iree import tools as iree
from workflow.errors import ConfigError, StageError
from workflow.measure.pairs import interleave, seed_of
from workflow.measure.plans import ab_plan
from workflow.measure.protocol import Observation
from workflow.records.stage import StageResult
from workflow.records.storage import read_json, write_json
from workflow.stages.iree import _benchmark, iree_invocation, sku_tool
from workflow.stats.enums import ABVerdict


def _invocation(argv: list[str], timeout: float, log: str, m: dict,
                seed: int) -> Callable[[], Observation]:
    """One side's invocation: a fresh process, its layout randomized as the SKU's cases'
    are (measure/layout.py), observed for disturbance."""
    layout = random.Random(seed) if m["randomize_layout"] else None
    return lambda: iree_invocation(argv, timeout, log, m, layout)


def compare_pair(*, base: str, new: str, workload: str, skus: dict, ab: dict,
                 timeout: float, out: str, log: str) -> dict:
    """The A/B row of one workload: the two SKUs' compiled modules (made by their IREE
    batch jobs) interleaved. A module that failed to compile gives a `failed` row naming
    the SKU and the stage, never a lost pair."""
    from workflow.paths import COMPILE_META, COMPILE_VMFB, EXPORT_INPUTS, EXPORT_META

    row = {"base": base, "new": new, "workload": workload, "kind": "iree"}
    with open(log, "a", encoding="utf-8", errors="replace") as fh:
        fh.write(f"A/B {base} -> {new} on {workload}\n")
    for sku in (base, new):
        compiled = StageResult.read(COMPILE_META.format(sku=sku, workload=workload))
        if not compiled.ok:
            result = {**row, "verdict": ABVerdict.FAILED, "failed_stage": compiled.failed_stage,
                      "error": f"{sku}: {compiled.error}"}
            write_json(out, result)
            return result
    dtypes = [i["dtype"] for i in read_json(EXPORT_META.format(workload=workload))["inputs"]]
    with tempfile.TemporaryDirectory() as tmp:
        args = iree.write_input_files(EXPORT_INPUTS.format(workload=workload), dtypes,
                                      Path(tmp))
        argvs = {}
        for sku in (base, new):
            m = skus[sku]["measurement"]
            argvs[sku] = iree.benchmark_argv(
                sku_tool(skus[sku], "benchmark_tool"),
                COMPILE_VMFB.format(sku=sku, workload=workload), "main", args, skus[sku],
                repetitions=m["repetitions"], warmup_s=m["min_warmup_time_s"],
                min_time=f"{m['min_time_s']:g}s")
        try:
            # One untimed call of each first: the first invocation of a fresh module
            # pays page faults and caches that the rounds should not.
            for sku in (base, new):
                _benchmark(argvs[sku], timeout, log)
            seed = seed_of(base, new, workload)
            measured = interleave(
                _invocation(argvs[base], timeout, log, skus[base]["measurement"], seed),
                _invocation(argvs[new], timeout, log, skus[new]["measurement"], seed + 1),
                ab_plan(ab), budget_s=ab["budget_s"], seed=seed, max_retakes=ab["max_retakes"])
        except StageError as exc:
            result = {**row, "verdict": ABVerdict.FAILED, "failed_stage": exc.stage,
                      "error": exc.message}
            write_json(out, result)
            return result
    result = {**row, **measured, "commands": argvs}
    write_json(out, result)
    return result


def aggregate(rows: list[str], out: str, *, suite_name: str, config_hash: str) -> dict:
    """Every A/B row into results/ab.json, validated against its schema before writing.
    A suite without ab_pairs has no rows: bad input, never an empty file that a gate
    reading it takes for "nothing regressed"."""
    from datetime import UTC, datetime

    from workflow.records.ab import SCHEMA_VERSION, validate_ab

    if not rows:
        raise ConfigError([f"{suite_name}: ab_pairs: none declared, so {out} would hold no "
                           "comparison; expected at least one {base, new} pair of SKUs"])

    doc = {"schema_version": SCHEMA_VERSION, "suite_name": suite_name,
           "config_hash": config_hash,
           "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
           "pairs": [read_json(p) for p in rows]}
    validate_ab(doc)
    write_json(out, doc)
    return doc
