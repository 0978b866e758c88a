"""Interleaved A/B comparison of two torch sides on one workload (or one workload each):
recipe vs baseline, compile mode vs eager, one torch build vs another (DESIGN.md, "A/B
pairs").

A fresh process per invocation, as IREE pairs have, would pay torch's import and
torch.compile's compilation before every timed block. Instead each side has a
long-lived worker (backends/torch/worker.py `serve`): built, quantized, compiled and
warmed up once, then asked for one timed block at a time. The two workers' blocks
alternate in rounds, in the seeded random order of measure/pairs.interleave, so load
and drift hit both sides and cancel in the round's ratio. One process's luck (its
memory layout, its compiled code, its thread placement) would then be in every round of
its side and cancel in none: so both workers are replaced by fresh ones every
`ab.torch_worker_rounds` rounds, and the rounds sample the differences between processes
too. The worker observes each block for outside load (measure/disturbance.Probe, with
its own CPU time as the timed process's), and a disturbed round is retaken.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from workflow.backends.proc import Streaming, exit_reason, first_lines, log_tail, python_env
from workflow.backends.worker_side import ended_by_own_bug, own_bug_marker
from workflow.comparisons.ab import attribution_of
from workflow.errors import OwnBug, StageError
from workflow.jobs.torch import with_threads
from workflow.measure.pairs import interleave, seed_of
from workflow.measure.plans import ab_plan
from workflow.measure.protocol import Observation
from workflow.records.kernels import kernels_section
from workflow.records.storage import write_json
from workflow.stats.enums import ABVerdict

WORKER = "workflow.backends.torch.worker"
ROLES = ("base", "new")


class _Worker:
    """One side's long-lived worker: started and prepared on construction (stage
    `prepare`), then one timed block per `block()` (stage `time`). A worker that fails,
    crashes (its model's os._exit or sys.exit too, with any status) or outlives `timeout`
    raises StageError naming the side; one that exits OWN_BUG_EXIT with its own-bug marker
    beside its plan (benchflow's own bug: worker_side.marking_own_bug) raises OwnBug, failing
    the job."""

    def __init__(self, label: str, plan: dict, *, timeout: float, log: str):
        self.label, self.timeout, self.log = label, timeout, log
        python = plan.get("python") or sys.executable
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(plan, fh)
            self._plan_file = fh.name
        self._proc = Streaming([python, "-m", WORKER, self._plan_file, "serve"], log=log,
                               env=python_env(python), commands=True)
        try:
            self.warmup_calls = self._expect("ready", "prepare")["warmup_calls"]
        except BaseException:
            self.close()
            raise

    def block(self) -> dict:
        """One timed block: {median_ms, iterations, cpu_s, wall_s[, phases_ms]}."""
        if not self._proc.send("time"):
            self._ended("time")
        return self._expect("block", "time")["result"]

    def profile(self) -> dict | None:
        """The side's per-op profile (the record's `kernels` shape), never timed."""
        if not self._proc.send("profile"):
            self._ended("profile")
        return self._expect("profile", "profile")["result"]

    def _expect(self, event: str, stage: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._proc.kill()
                raise StageError(stage, f"{self.label}: torch worker timed out after "
                                        f"{self.timeout:g} s ({stage})")
            line = self._proc.readline(min(left, 1.0))
            if line is None:
                continue
            if not line:
                self._ended(stage)
            msg = json.loads(line)
            if msg["event"] == event:
                return msg
            if msg["event"] == "result":  # the case cannot run here, or failed
                r = msg["result"]
                raise StageError(stage, f"{self.label}: {r['status']}: "
                                        f"{r.get('error') or r.get('reason')}")

    def _ended(self, stage: str):
        code = self._proc.wait()
        tail = log_tail(self.log, 4000)
        if ended_by_own_bug(code, self._plan_file):
            raise OwnBug(f"benchflow's own code failed in the torch A/B worker of "
                         f"{self.label} ({stage}):\n{tail}")
        raise StageError(stage, first_lines(
            f"{self.label}: torch worker {exit_reason(code)} ({stage}):\n{tail[-2000:]}"))

    def close(self) -> None:
        self._proc.__exit__()
        os.unlink(self._plan_file)
        own_bug_marker(self._plan_file).unlink(missing_ok=True)


class _Side:
    """A side's timed blocks as observations, from a fresh worker every `rounds` blocks
    (a side is asked once per round, so both sides change workers in the same round)."""

    def __init__(self, spec: dict, *, threads: int, block_s: float, rounds: int,
                 timeout: float, log: str):
        sku = spec["sku"]
        self.label, self.rounds, self.timeout, self.log = spec["label"], rounds, timeout, log
        self.plan = {"backend": spec["backend"], "threads": threads,
                     "measurement": sku["measurement"], "python": sku["torch"]["python"],
                     "block_s": block_s, "cases": [spec["case"]]}
        self.worker: _Worker | None = None
        self.blocks = self.workers = 0

    def __call__(self) -> Observation:
        if self.blocks % self.rounds == 0:
            self.close()
            self.worker = _Worker(self.label, self.plan, timeout=self.timeout, log=self.log)
            self.workers += 1
        self.blocks += 1
        block = self.worker.block()
        # Observed by the worker around its timed block (measure/disturbance.Probe, with
        # the worker's own CPU time as the timed process's).
        return Observation(block["median_ms"], block, block["disturbance"])

    def profile(self) -> dict | None:
        """The side's per-op profile from its current worker (warm: it just timed the
        last round), or a fresh one's; a worker that fails or crashes here is the
        profile's `error`, never the row's: the rounds stand."""
        try:
            if self.worker is None:
                self.worker = _Worker(self.label, self.plan, timeout=self.timeout, log=self.log)
            return self.worker.profile()
        except StageError as exc:
            m = self.plan["measurement"]
            return kernels_section(source="torch.profiler", mode=None,
                                   calls=m["profile_calls"], rows=[], seconds=None,
                                   error=exc.message)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def block_seconds(pair: dict, ab: dict) -> float:
    """One timed block's seconds: ab.torch_block_s, else the longer of the two SKUs'
    measurement.torch_min_run_time_s (both sides' blocks are equally long)."""
    if ab["torch_block_s"] is not None:
        return ab["torch_block_s"]
    return max(pair[r]["sku"]["measurement"]["torch_min_run_time_s"] for r in ROLES)


def side_threads(pair: dict, log: str) -> dict[str, int]:
    """Each side's torch threads. A SKU's `threads: 0` (what the machine can give,
    jobs/torch.with_threads) is decided once for the pair, so that two sides with the
    same settings never differ in it."""
    decided, out = None, {}
    for r in ROLES:
        sku = pair[r]["sku"]
        if not sku["torch"]["threads"] and decided is None:
            decided = with_threads(sku, log)["torch"]["threads"]
        out[r] = sku["torch"]["threads"] or decided
    return out


def compare_torch_pair(*, pair: dict, ab: dict, timeout: float, out: str, log: str) -> dict:
    """The A/B row of one torch pair (planning/plan.torch_ab_plan): the two sides' blocks
    interleaved. A side whose worker cannot run, fails, crashes or times out gives a
    `failed` row naming the side and the stage, never a lost pair."""
    block_s = block_seconds(pair, ab)
    row = {"base": pair["base"]["label"], "new": pair["new"]["label"],
           "workload": pair["workload"], "kind": "torch",
           "sides": {r: pair[r]["side"] for r in ROLES},
           "worker_rounds": ab["torch_worker_rounds"], "block_s": block_s}
    workloads = {r: pair[r]["side"]["workload"] for r in ROLES}
    if workloads["base"] != workloads["new"]:
        row["workloads"] = workloads
    with open(log, "a", encoding="utf-8", errors="replace") as fh:
        fh.write(f"torch A/B {row['base']} -> {row['new']} on {row['workload']}\n")
    row["threads"] = side_threads(pair, log)
    sides = {r: _Side(pair[r], threads=row["threads"][r], block_s=block_s,
                      rounds=ab["torch_worker_rounds"], timeout=timeout, log=log)
             for r in ROLES}
    try:
        measured = interleave(sides["base"], sides["new"], ab_plan(ab), budget_s=ab["budget_s"],
                              seed=seed_of(row["base"], row["new"], row["workload"]),
                              max_retakes=ab["max_retakes"])
        # After the rounds (never timed): each side's per-op profile, unless either SKU
        # has measurement.profile false (a one-sided profile explains nothing).
        profiles = ({r: sides[r].profile() for r in ROLES}
                    if all(pair[r]["sku"]["measurement"]["profile"] for r in ROLES) else None)
    except StageError as exc:
        result = {**row, "verdict": ABVerdict.FAILED, "failed_stage": exc.stage,
                  "error": exc.message}
        write_json(out, result)
        return result
    finally:
        for side in sides.values():
            side.close()
    result = {**row, **measured, "workers": {r: sides[r].workers for r in ROLES}}
    if profiles is not None:
        result.update(kernels=profiles, attribution=torch_row_attribution(result, pair,
                                                                         profiles))
    write_json(out, result)
    return result


def torch_row_attribution(row: dict, pair: dict, profiles: dict) -> dict:
    """The row's explanation (regression/explain.py), with the totals, noise and decided
    verdict of an IREE row (comparisons/ab.row_attribution: the base rounds' median and that
    x the ratio); what changed: the sides' SKU, backend and recipe, threads and torch
    interpreter, and the model's source files where the sides carry them (two
    revisions' sides)."""
    sides = {r: {"sku": pair[r]["side"]["sku"], "backend": pair[r]["side"]["backend"],
                 "recipe": pair[r]["side"]["recipe"], "kernels": profiles[r],
                 "provenance": {"torch_threads": row["threads"][r],
                                "torch_python": pair[r]["sku"]["torch"]["python"],
                                # Two revisions' sides (bisect/suite_ab.py) carry them.
                                **({"model_sources": pair[r]["model_sources"]}
                                   if pair[r].get("model_sources") else {})}}
             for r in ROLES}
    return attribution_of(row, sides["base"], sides["new"])


def torch_side(suite, case, label: str) -> dict:
    """A torch case of a loaded suite as one side of a torch A/B pair
    (compare_torch_pair; what planning/plan.torch_ab_plan gives a suite's own pair): its
    worker imports the model files the workload's model_modules name (a revision's tree
    in bisect/prepare.py, a golden's stored copy in baselines/)."""
    from workflow.planning.keys import sku_settings

    return {"label": label,
            "side": {"sku": case.sku, "backend": case.backend, "recipe": case.recipe,
                     "workload": case.workload.id},
            "case": {"id": case.id, "identity": case.identity(),
                     "workload": case.workload.spec(), "recipe": case.recipe},
            "backend": suite.config["torch_backends"][case.backend],
            "sku": sku_settings(suite.sku(case.sku))}
