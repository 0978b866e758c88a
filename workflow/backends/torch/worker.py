"""Torch measurements in a worker process (the stage: workflow/jobs/torch.py).

    python -m workflow.backends.torch.worker PLAN_JSON batch|serve

A plan is a batch of cases of one SKU, of any torch backends (`backends`, by name) and
recipes. `batch` measures them in this one process, a group of cases held warm at once
after another (DESIGN.md, "Measurement protocol"): each case built, quantized and
compiled once and characterized (support checks, accuracy against the fp32 eager
reference, SQNR against the unquantized module, first call, compile time, peak memory,
profiler artifacts, the per-op profile of ops_profile.py); then the group's invocations
in interleaved rounds, decided by the one protocol loop (measure.protocol.measure), each
case with its own budget; then each case's graph statistics (torch.export, Dynamo's
explain, which resets Dynamo and so comes last). An invocation is a child forked from
this warm process (CPU, one thread) or, where forking is unsafe, a timed block in this
process after fresh input buffers (`invocation_kind`). A "start" line names the case
whose step begins, a "tick" line ends each phase and invocation, a "result" line
carries a case's result, as JSON on the protocol channel, so that the parent can
enforce a deadline per step and lose at most the case that hung or crashed. `serve` is
one side of a torch A/B pair: one case, prepared once, timed block by block on request.
"""
from __future__ import annotations

import faulthandler
import json
import os
import sys
import time
import traceback
from pathlib import Path

from workflow.backends.torch.characterize import characterized, graph_stats_compiled
from workflow.backends.torch.invocations import timed_invocations
from workflow.backends.torch.ops_profile import profile_ops
from workflow.backends.torch.prepared import (
    Unsupported,
    allow_compiles,
    observed_block,
    prepare_warm,
    probe_device,
    sync,
)
from workflow.backends.torch.recipes import (
    device_reason,
    parse,
)
from workflow.backends.worker_side import marking_own_bug, protocol_channel, worker_main
from workflow.errors import OWN_BUG_EXIT, raised_in_own_code
from workflow.measure.cost import Cost
from workflow.models.outputs import checked_outputs
from workflow.records.storage import WriteError
from workflow.stats.enums import Status

_CHANNEL: list = []


def emit(event: str, case: str, **data) -> None:
    print(json.dumps({"event": event, "case": case, **data}),
          file=_CHANNEL[0] if _CHANNEL else sys.stdout, flush=True)


def measure_group(cases: list[dict], backends: dict[str, dict], plan: dict,
                  say=None) -> dict[str, dict]:
    """A group of cases whole, in this process (DESIGN.md, "Measurement protocol"): each
    characterized and kept warm, then their invocations interleaved, one of each case
    still measuring per round (the protocol's loop, each case with its own budget and
    target width), so that a drift of the machine spreads over every case instead of
    shifting one case's consecutive invocations together; then each case's graph
    statistics (last: Dynamo's explain resets Dynamo, so no compiled module is called
    after it). Each result carries the record's `timing` and `cost`; an invocation that
    failed is `run_error`, the characterization kept. `say(event, case_id, **data)` hears
    of each step ("start" when a case's step begins, "tick" when a phase ends).
    `backends`: the torch backends' settings by name (a case's `backend`)."""
    say = say or (lambda *a, **k: None)
    results: dict[str, dict] = {}
    warm: dict[str, tuple] = {}  # case id -> (case, prepared, cost, its own seconds so far)
    for case in cases:
        say("start", case["id"])
        t0 = time.perf_counter()
        cost = Cost(lambda phase, s, cid=case["id"]: say("tick", cid, phase=phase, seconds=s),
                    lambda phase, cid=case["id"]: say("phase", cid, phase=phase))
        try:
            result, prepared = characterized(case, backends[case["backend"]], plan, cost)
        except Exception as exc:  # the model's failure is this case's alone
            result, prepared = _failed(exc), None
        results[case["id"]] = result
        if prepared is not None:
            warm[case["id"]] = (case, prepared, cost, time.perf_counter() - t0)
    if not warm:
        return results
    timings = timed_invocations({cid: (c, p, cost) for cid, (c, p, cost, _) in warm.items()},
                                plan, lambda cid: say("start", cid))
    for cid, (_, prepared, cost, own) in warm.items():
        say("start", cid)
        results[cid].update(timings[cid])
        with cost.phase("graph_s"):
            try:
                results[cid]["graph"] = graph_stats_compiled(prepared)
            except Exception as exc:
                results[cid] = _failed(exc)
                continue
        # Its own phases, and its share of the interleaved rounds.
        cost.seconds["total_s"] = (own + cost.seconds["graph_s"]
                                   + cost.seconds.get("invocations_s", 0.0))
        results[cid]["cost"] = cost.seconds
    return results


def measure_case(case: dict, backend: dict, plan: dict) -> dict:
    """One case alone (measure_group of one)."""
    return measure_group([case], {case["backend"]: backend}, plan)[case["id"]]


def groups(cases: list[dict], cap_bytes: float) -> list[list[dict]]:
    """The batch's cases in groups held warm at once: consecutive cases while their
    weights (the stage's estimate, `weight_bytes`) add up to at most cap_bytes; a case
    larger than that alone."""
    out: list[list[dict]] = []
    held = 0.0
    for case in cases:
        size = case.get("weight_bytes") or 0
        if out and held + size <= cap_bytes:
            out[-1].append(case)
            held += size
        else:
            out.append([case])
            held = size
    return out


def serve(plan: dict, commands=sys.stdin) -> None:
    """A long-lived worker of an A/B pair (comparisons/ab_torch.py): the plan's one case is
    prepared once (built, quantized, compiled, warmed up), then each "time" line read from
    `commands` runs one timed block of plan["block_s"] seconds, and a "profile" line the
    case's per-op profile (ops_profile.profile_ops: a "profile" line, its `kernels`).
    Lines on stdout: "start", then "ready" (or a "result" saying why the case cannot run,
    and the end), then one "block" per "time" command: its median, iterations, the CPU
    seconds (every thread of this process) and wall seconds of the block, and what
    disturbed it (observed here, as an invocation does: the timed block runs on this
    process's threads)."""
    case = plan["cases"][0]
    emit("start", case["id"])
    w = case["workload"]
    device, why = probe_device(w["device"], case["recipe"])
    why = why or device_reason(parse(case["recipe"]), device=device, dtype=w["dtype"])
    if why:
        emit("result", case["id"], result={"status": Status.UNSUPPORTED, "reason": why})
        return
    try:
        prepared, calls = prepare_warm(case, plan["backend"], plan)
    except Unsupported as exc:
        emit("result", case["id"], result={"status": Status.UNSUPPORTED, "reason": str(exc)})
        return
    if prepared.mode != "training":  # a training step checks its loss's tensor itself
        # A forward that returns no tensor (None from a forgotten `return`) fails the case
        # before a block is timed, as the batch's first call fails it (models/outputs.py):
        # an A/B pair of two Nones would be timed and judged. The TypeError is raised in
        # models/, so main's _failed records it as the case's failure, not our bug.
        checked_outputs(prepared.forward())
    emit("ready", case["id"], warmup_calls=calls)
    for line in commands:
        if line.strip() == "profile":  # after the rounds: the side's per-op profile
            emit("profile", case["id"], result=profile_ops(
                prepared.call, lambda: sync(prepared.device), plan["measurement"],
                cuda=prepared.device.kind == "cuda"))
        elif line.strip() == "time":
            emit("block", case["id"], result=observed_block(prepared, plan, plan["block_s"]))
        else:
            raise ValueError(f"serve: unknown command {line.strip()!r}; expected 'time' "
                             "or 'profile'")


def _failed(exc: Exception) -> dict:
    """A case's exception as its failed result; benchflow's own bug ends the worker with
    OWN_BUG_EXIT instead, its marker written on the way out (worker_side.marking_own_bug: the
    parent fails the job, errors.OwnBug). A file it could not
    write (WriteError: a full or read-only disk) is the machine's failure, the case's."""
    traceback.print_exc(file=sys.stderr)
    if raised_in_own_code(exc) and not isinstance(exc, WriteError):
        sys.exit(OWN_BUG_EXIT)
    return {"status": Status.FAILED, "error": f"{type(exc).__name__}: {exc}"}


def main(argv: list[str]) -> None:
    # A case that crashes the interpreter (a segfault in a kernel or a model) leaves its
    # Python traceback in the job's log, where the parent's error message quotes it.
    faulthandler.enable(file=sys.stderr)
    _CHANNEL[:] = [protocol_channel()]
    plan_path, pass_name = argv
    plan = json.loads(Path(plan_path).read_text())
    if pass_name == "serve":
        try:
            serve(plan)
        except Exception as exc:
            emit("result", plan["cases"][0]["id"], result=_failed(exc))
        return
    if pass_name != "batch":
        raise ValueError(f"worker: unknown pass {pass_name!r}; expected 'batch' or 'serve'")
    start_s = _started(plan)
    allow_compiles(len(plan["cases"]))

    def say(event: str, case_id: str, **data) -> None:
        if event == "tick":  # the job's log says where each case's time went
            print(f"{case_id}: {data['phase']} {data['seconds']:.2f} s", file=sys.stderr,
                  flush=True)
        emit(event, case_id, **{k: v for k, v in data.items() if k != "seconds"})

    for group in groups(plan["cases"], plan.get("group_bytes") or 0):
        try:
            results = measure_group(group, plan["backends"], plan, say)
        except Exception as exc:  # a case failed the group: its cases are failed
            failed = _failed(exc)
            results = {case["id"]: failed for case in group}
        for case in group:
            result = results[case["id"]]
            if start_s is not None and "cost" in result:
                # Charged to the worker's first measured case: a batch's costs add up.
                result["cost"]["worker_start_s"] = start_s
                result["cost"]["total_s"] += start_s
                start_s = None
            emit("result", case["id"], result=result)


def _started(plan: dict) -> float | None:
    """This worker's start, from its spawn (the plan's `spawned_at`, wall clock) to torch
    (and torchao, for a quantized recipe) imported."""
    import torch  # noqa: F401 - imported here so that its cost is the start's

    if any(parse(c["recipe"]).quantized for c in plan["cases"]):
        import torchao  # noqa: F401
    spawned = plan.get("spawned_at")
    return max(0.0, time.time() - spawned) if spawned else None


if __name__ == "__main__":
    # benchflow's own bug (an exception raised in our code, or _failed's exit) exits
    # OWN_BUG_EXIT with the marker beside the plan, which the parent needs to fail the
    # job; a model's own exit, with any status, is its case's failure (jobs/torch.py).
    with marking_own_bug(sys.argv[1]):
        worker_main(main)
    # Every result is out: end without the interpreter's teardown of torch and
    # torch.compile's worker pools (about a second a batch on the 2-core machine).
    for stream in (*_CHANNEL, sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)

