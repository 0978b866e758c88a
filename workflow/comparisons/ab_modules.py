"""Two built IREE modules measured as a pair: each side a module with its own inputs
(built from its own model sources), interleaved in the A/B protocol's rounds
(comparisons/ab.py's invocations and profiles, measure/pairs.interleave,
measure/plans.ab_plan) and explained as an A/B row is (comparisons/ab.attribution_of). A
bisection step (bisect/measure.py) pairs two revisions' builds; `check` pairs a
golden's blessed module with today's (baselines/pair.py). Only the modules
differ from an ab_pairs row: there the two sides share one export.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from workflow.backends.iree import tools as iree
from workflow.backends.output import MACHINE_ERRNOS, machine_fault
from workflow.comparisons.ab import attribution_of, pair_invocation, pair_profiles, round_settings
from workflow.errors import StageError
from workflow.jobs.iree import benchmark_run, sku_tool
from workflow.measure.pairs import interleave, seed_of
from workflow.measure.plans import ab_plan
from workflow.stats.enums import ABVerdict

SIDES = ("base", "new")


def _vanished(exc: OSError, sides: tuple[dict, dict]) -> tuple[str, str] | None:
    """(the side, why) when `exc` is a side's build file gone from its cache (a cleaner,
    or another bisection, removed it while this pair ran); None for any other error."""
    if not isinstance(exc, FileNotFoundError) or not exc.filename:
        return None
    for side, prepared in zip(SIDES, sides, strict=True):
        if str(exc.filename) in (str(prepared.get("inputs")), str(prepared.get("vmfb"))):
            return side, (f"{exc.filename}: its build in the cache is gone (removed while "
                          "the bisection ran: a cache cleaner, or another bisection); rerun "
                          "to build it again")
    return None


def failed_row(row: dict, side: str, failed: dict, fault: str | None = None) -> dict:
    """A failed row naming the side; `fault`: the line that says the machine refused
    a write (a full cache disk, a quota, a read-only file system: output.machine_fault),
    or a build the cache lost, which is this machine's failure, not the revision's, and
    no retry would change."""
    row = {**row, "verdict": ABVerdict.FAILED, "failed_stage": failed["stage"],
           "error": f"{row[side]}: {failed['error']}"}
    fault = fault or machine_fault(str(failed["error"] or ""))
    if fault:
        row["fault"] = fault
    return row


def _side(prepared: dict, kernels: dict | None, argv: list[str]) -> dict:
    """A side as attribution_of reads a record: its kernels, flags and provenance (the
    tools' builds and the model's sources by digest: what a revision changed)."""
    return {"sku": prepared["identity"]["sku"], "kernels": kernels,
            "compile": {"flags": prepared["compile_flags"]},
            "provenance": {"iree_device": prepared["sku"]["iree"]["device"],
                           "benchmark_tool": argv[0], "builds": prepared["parts"]["tools"],
                           "model_sources": prepared["model_sources"]}}


def pair_modules(names: tuple[str, str], sides: tuple[dict, dict], ab: dict, *,
                 log: str, seed_extra: str = "") -> dict:
    """The A/B row of two built modules (`sides`: bisect/prepare.py's answers, or a
    golden's baseline and today's case, base first) under the `ab` settings; seed_extra
    tells apart two pairs of the same names and workload (a bisection's rescaled step).
    A side that failed to build, or a tool that failed in a round, is a failed row naming
    the side."""
    base, new = sides
    row = {"base": names[0], "new": names[1], "workload": base["identity"]["workload"],
           "kind": "iree"}
    for side, prepared in zip(SIDES, sides, strict=True):
        if prepared.get("error") or prepared.get("failed"):
            return failed_row(row, side, prepared.get("failed")
                           or {"stage": "suite", "error": prepared.get("error")})
    timeout = base["timeouts"]["run_s"]
    skus = {side: p["sku"] for side, p in zip(SIDES, sides, strict=True)}
    invocation = {side: round_settings(ab, skus[side]["measurement"]) for side in SIDES}
    with tempfile.TemporaryDirectory() as tmp:
        argvs = {}
        try:
            for side, p in zip(SIDES, sides, strict=True):
                (Path(tmp) / side).mkdir()
                args = iree.write_input_files(p["inputs"], p["dtypes"], Path(tmp) / side)
                r = invocation[side]
                argvs[side] = iree.benchmark_argv(
                    sku_tool(skus[side], "benchmark_tool"), p["vmfb"], "main", args,
                    skus[side], repetitions=r["repetitions"],
                    warmup_s=r["min_warmup_time_s"], min_time=f"{r['min_time_s']:g}s")
            for side in SIDES:  # untimed: a fresh module's first call pays page faults
                benchmark_run(argvs[side], timeout, log)
            seed = seed_of(*names, row["workload"], seed_extra)
            measured = interleave(
                pair_invocation(argvs["base"], timeout, log, skus["base"]["measurement"], seed),
                pair_invocation(argvs["new"], timeout, log, skus["new"]["measurement"], seed + 1),
                ab_plan(ab), budget_s=ab["budget_s"], seed=seed,
                max_retakes=ab["max_retakes"])
            profiles = pair_profiles(argvs, "base", "new", skus, timeout, log)
        except StageError as exc:
            return failed_row(row, "new", {"stage": exc.stage, "error": exc.message})
        except OSError as exc:  # our own write (the inputs, the log) that the machine refused
            gone = _vanished(exc, sides)
            if gone:
                return failed_row(row, gone[0], {"stage": "measure", "error": gone[1]},
                                  fault=gone[1])
            if exc.errno not in MACHINE_ERRNOS:
                raise
            where = exc.filename or f"a file in {tmp}"
            return failed_row(row, "new", {"stage": "measure",
                                           "error": f"could not write {where}: "
                                                    f"{exc.strerror}"})
    row.update(measured, commands=argvs, invocation=invocation)
    kernels = profiles or {}
    row["attribution"] = attribution_of(row, _side(base, kernels.get("base"), argvs["base"]),
                                        _side(new, kernels.get("new"), argvs["new"]))
    return row
