"""A torch case's timed invocations, decided by the one protocol loop
(measure.protocol.measure): each a child forked from the warm worker, or a timed block in
it where forking is unsafe (DESIGN.md, "Measurement protocol")."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
import traceback

from workflow.backends.proc import exit_reason
from workflow.backends.torch.prepared import (
    Prepared,
    fresh_buffers,
    observed_block,
    sync,
    warm_up,
)
from workflow.errors import raised_in_own_code
from workflow.measure.cost import Cost
from workflow.measure.protocol import Measured, Observation, measure, timing_section


def _can_fork(prepared: Prepared, threads: int) -> bool:
    """Whether an invocation may be a forked child of this process: on the CPU with one
    thread. A CUDA context does not survive fork, and GNU OpenMP (torch's CPU thread
    pool) leaves a child forked after it ran a parallel region hung at its first one
    (seen here: torch 2.13, 2 threads), so those measure in-process blocks instead."""
    return prepared.device.kind == "cpu" and threads == 1 and hasattr(os, "fork")


def timed_invocations(warm: dict[str, tuple], plan: dict, starting) -> dict[str, dict]:
    """The timed invocations of warm cases (case id -> (case, prepared, cost)) by the
    protocol (measure.protocol.measure): rounds of one invocation of each case still
    measuring, each a forked child or an in-process block (_can_fork), each case with its
    own budget and target width (its `target`: a golden's question, planning/targets.py).
    `starting(case_id)` is called before each invocation. Per case its `timing`, or
    `run_error`."""
    m = plan["measurement"]
    invokers = {cid: _Invoker(case, prepared, plan, cost)
                for cid, (case, prepared, cost) in warm.items()}

    def run(ids: list[str]) -> dict[str, Observation | str]:
        out = {}
        for cid in ids:
            starting(cid)
            out[cid] = invokers[cid]()
        return out

    measured = measure(run, list(warm), m, targets={
        cid: inv.target for cid, inv in invokers.items() if inv.target})
    return {cid: invokers[cid].timing(measured[cid], m) for cid in warm}


class _Invoker:
    """One case's invocations: forked children of this process while it can fork (and a
    child answers), else in-process blocks; each one's seconds in the case's cost."""

    def __init__(self, case: dict, prepared: Prepared, plan: dict, cost: Cost):
        self.case, self.prepared, self.plan, self.cost = case, prepared, plan, cost
        self.target = case.get("target")
        self.kind = "fork" if _can_fork(prepared, plan["threads"]) else "block"
        m = plan["measurement"]
        # A forked child that neither answers nor ends by this deadline is killed and its
        # invocation made again as a block (a lock held at fork time would hang it).
        self.deadline = (30 + 3 * (m["torch_warmup_s"] + m["torch_min_run_time_s"])
                         + 50 * _warm_call_seconds(prepared))
        self.kinds: list[str] = []

    def __call__(self) -> Observation | str:
        t0 = time.perf_counter()
        with self.cost.phase("invocations_s"):
            got = _forked(self.prepared, self.plan, self.deadline) \
                if self.kind == "fork" else None
            if got is None:
                if self.kind == "fork":
                    print(f"{self.case['id']}: a forked invocation gave no result in "
                          f"{self.deadline:.0f} s; its invocations are in-process blocks "
                          "from here", file=sys.stderr)
                    self.kind = "block"
                got = self._block()
        self.kinds.append(self.kind)
        if isinstance(got, str):
            return got
        self.cost.add("warmup_s", got["warmup_s"])
        self.cost.add("timed_s", got["wall_s"])
        return Observation(got["median_ms"], got, got.get("disturbance"),
                           seconds=time.perf_counter() - t0)

    def _block(self) -> dict | str:
        """An in-process invocation; a model's exception is the case's failure, one of
        benchflow's own code is raised (the worker ends with OWN_BUG_EXIT)."""
        try:
            return _one_invocation(self.prepared, self.plan)
        except Exception as exc:
            if raised_in_own_code(exc):
                raise
            traceback.print_exc(file=sys.stderr)
            return f"{type(exc).__name__}: {exc}"

    def timing(self, measured: Measured, m: dict) -> dict:
        """The case's `timing` (the protocol's fields and torch's own), or `run_error`."""
        if measured.error:
            return {"run_error": measured.error}
        samples = [o.data for o in measured.kept]
        timing = timing_section(measured, m)
        phases = None
        if samples and "phases_ms" in samples[0]:
            phases = {k: statistics.median([s["phases_ms"][k] for s in samples])
                      for k in samples[0]["phases_ms"]}
        # torch has no --benchmark_repetitions: its timed calls per invocation are their
        # own field.
        timing.update(repetitions=None, calls_per_invocation=int(statistics.median(
            s["iterations"] for s in samples)), phases_ms=phases, invocation_kind=self.kinds[-1])
        return {"timing": timing}


def _warm_call_seconds(prepared: Prepared) -> float:
    t0 = time.perf_counter()
    prepared.call()
    sync(prepared.device)
    return time.perf_counter() - t0


def _one_invocation(prepared: Prepared, plan: dict) -> dict:
    """One invocation of a warm case: fresh input buffers, warm-up, a timed block."""
    fresh_buffers(prepared)
    m = plan["measurement"]
    t0 = time.perf_counter()
    calls = warm_up(prepared, m)
    warm_s = time.perf_counter() - t0
    block = observed_block(prepared, plan, m["torch_min_run_time_s"])
    return {**block, "warmup_calls": calls, "warmup_s": warm_s}


def _forked(prepared: Prepared, plan: dict, deadline: float) -> dict | str | None:
    """_one_invocation in a child forked from this process: its result, an error string
    (the child failed or died), or None when it gave nothing within `deadline` s."""
    import selectors

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one invocation, its result on the pipe, and out
        os.close(r)
        try:
            data = {"result": _one_invocation(prepared, plan)}
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
            traceback.print_exc(file=sys.stderr)
            data = {"error": f"{type(exc).__name__}: {exc}", "own": raised_in_own_code(exc)}
        with contextlib.suppress(BaseException), os.fdopen(w, "wb") as out:
            out.write(json.dumps(data).encode())  # all of it, in as many writes as it takes
        os._exit(0)  # no atexit handlers, no flushing of the parent's buffers twice
    os.close(w)
    chunks = []
    with os.fdopen(r, "rb") as fh, selectors.DefaultSelector() as sel:
        sel.register(fh, selectors.EVENT_READ)
        end = time.monotonic() + deadline
        while True:
            left = end - time.monotonic()
            if left <= 0 or not sel.select(left):
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                return None
            chunk = os.read(fh.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if not chunks or code != 0:
        return f"the invocation's process {exit_reason(code)}"
    data = json.loads(b"".join(chunks))
    if "error" in data:
        if data["own"]:
            raise RuntimeError(f"benchflow's own code failed in a forked invocation: "
                               f"{data['error']}")
        return data["error"]
    return data["result"]


