"""The torch stage: measures a batch of torch cases (one Snakemake job) with fresh
worker processes, following DESIGN.md's protocol.

One `characterize` process per batch, then `invocations` `time` processes, each of
which measures every case of the batch once: the invocation (a fresh process) stays
the unit of the statistics, while the interpreter and torch start-up is paid once per
process rather than once per case. Cases are interleaved across processes, which also
spreads slow drifts of the machine over all cases instead of biasing one.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from workflow.backends.builds import interpreter_versions
from workflow.backends.proc import Streaming, exit_reason, first_lines, log_tail, python_env
from workflow.errors import OWN_BUG_EXIT, OwnBug
from workflow.measure.disturbance import available_cpus
from workflow.measure.protocol import Measured, Observation, measure, timing_section
from workflow.records.case import assemble, torch_provenance
from workflow.records.stage import StageResult
from workflow.records.storage import write_json
from workflow.stages.keys import sources_of
from workflow.stages.members import write_files_members
from workflow.stats.enums import Status
from workflow.stats.summary import median


def run_pass(plan: dict, pass_name: str, cases: list[dict], *, timeout_per_case: float,
             log: str | None) -> dict[str, dict]:
    """Runs one worker pass over `cases`; returns case id -> result.

    A case that exceeds its deadline or crashes the worker is recorded as failed and
    the pass goes on with the cases after it in a new worker, so one bad case never
    costs the batch.
    """
    results: dict[str, dict] = {}
    python = plan.get("python") or sys.executable
    remaining = list(cases)
    while remaining:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump({**plan, "cases": remaining}, fh)
            plan_file = fh.name
        try:
            done, stuck, why = _one_worker(python, plan_file, pass_name, timeout_per_case, log)
        finally:
            os.unlink(plan_file)
        results.update(done)
        if stuck is not None:
            results[stuck] = {"status": Status.FAILED, "error": why}
        finished = set(done) | ({stuck} if stuck else set())
        if not finished:  # the worker died before its first case: fail them all
            for case in remaining:
                results[case["id"]] = {"status": Status.FAILED, "error": why}
            break
        remaining = [c for c in remaining if c["id"] not in finished]
    return results


def _one_worker(python: str, plan_file: str, pass_name: str, timeout: float,
                log: str | None):
    """Runs a worker until it ends; returns (results, id of a case it hung or crashed
    on, why)."""
    results: dict[str, dict] = {}
    current, deadline = None, time.monotonic() + timeout
    with Streaming([python, "-m", "workflow.backends.torch.worker", plan_file, pass_name],
                   log=log, env=python_env(python)) as worker:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                worker.kill()
                return results, current, f"timeout after {timeout:g} s ({pass_name})"
            line = worker.readline(min(left, 1.0))
            if line is None:
                continue
            if not line:
                break
            msg = json.loads(line)
            if msg["event"] == "start":
                current, deadline = msg["case"], time.monotonic() + timeout
            elif msg["event"] == "result":
                results[msg["case"]] = msg["result"]
                current = None
        code = worker.wait()
        if code == OWN_BUG_EXIT:
            tail = log_tail(log, 4000)
            raise OwnBug(f"benchflow's own code failed in the torch worker ({pass_name}, "
                         f"case {current}):\n{tail}")
        if current is not None or code != 0:
            tail = log_tail(log, 2000)
            return results, current, first_lines(
                f"torch worker {exit_reason(code)} ({pass_name}):\n{tail}")
        return results, None, ""


def run_torch_batch(*, cases: list[dict], backend: dict, sku: dict, tolerances: dict,
                    timeout_per_case: float, out_dir: str, log: str) -> list[dict]:
    """Measures a batch and writes one case record per case under out_dir/cases/.
    Golden verdicts are added at aggregation, so blessing never re-measures a batch."""
    out = Path(out_dir)
    (out / "cases").mkdir(parents=True, exist_ok=True)
    m = sku["measurement"]
    sku = with_threads(sku, log)
    plan = {"backend": backend, "threads": sku["torch"]["threads"], "measurement": m,
            "tolerances": tolerances, "artifacts_dir": str(out / "artifacts"),
            "python": sku["torch"].get("python")}
    t0 = time.monotonic()
    char = run_pass(plan, "characterize", cases, timeout_per_case=timeout_per_case, log=log)
    live = {c["id"]: c for c in cases if char[c["id"]].get("status") == Status.OK}
    passes = 0

    def invocation(ids: list[str]) -> dict[str, Observation | str]:
        """One worker pass: one invocation of every case still measuring."""
        nonlocal passes
        passes += 1
        res = run_pass(plan, "time", [live[i] for i in ids],
                       timeout_per_case=timeout_per_case, log=log)
        return {i: r["error"] if r.get("status") == Status.FAILED
                else Observation(r["median_ms"], r, r.get("disturbance")) for i, r in res.items()}

    measured = measure(invocation, list(live), m)
    measure_s = time.monotonic() - t0
    interpreter = interpreter_provenance(plan["python"], log)
    records = []
    for case in cases:
        results = torch_results(char[case["id"]], measured.get(case["id"]), m,
                                case["identity"]["compile_mode"])
        # With the model's source files by digest, as an IREE case's (stages/iree.py).
        data = assemble(case["identity"], results,
                        {**torch_provenance(sku, char[case["id"]]), **interpreter,
                         "model_sources": sources_of(case["workload"])})
        write_json(out / "cases" / f"{case['identity']['workload']}.json", data)
        records.append(data)
    write_json(out / "batch.json", {
        "cases": [c["id"] for c in cases], "seconds": measure_s, "threads": plan["threads"],
        "worker_passes": 1 + passes})
    # Beside the batch directory: what the Snakefile checks before the next run.
    write_files_members(out_dir, {c["id"]: str(out / "cases" / f"{c['identity']['workload']}.json")
                                  for c in cases})
    return records


def interpreter_provenance(python: str | None, log: str | None) -> dict:
    """A SKU's own interpreter and the torch / torchao it imports (nothing for ours,
    whose versions the report's provenance holds)."""
    if not python:
        return {}
    # The probe that names the interpreter's builds in the stages' keys (cached there).
    versions = interpreter_versions(python)
    if versions is None:
        versions = {"torch": None, "torchao": None}
        if log:
            with open(log, "a", encoding="utf-8", errors="replace") as fh:
                fh.write(f"could not ask {python} for its torch version\n")
    return {"torch_python": python, "torch_version": versions.get("torch"),
            "torchao_version": versions.get("torchao")}


def torch_results(char: dict, measured: Measured | None, m: dict,
                  compile_mode: str | None) -> list[StageResult]:
    """A torch case's stage results for the one case assembler: `characterize` (graph,
    accuracy, memory, profile, kernels, torch.compile's first call), then `run` (the timing
    statistics of its invocations, measure/protocol.py's). Failures of either are
    recorded at stage `run`."""
    status = char.get("status")
    if status == Status.UNSUPPORTED:
        return [StageResult("characterize", Status.UNSUPPORTED, error=char["reason"])]
    if status != Status.OK:
        return [StageResult("characterize", Status.FAILED, "run",
                            char.get("error", "unknown error"))]
    # `kernels`: the per-op profile (backends/torch/ops_profile.py), apart from `profile`,
    # the Chrome trace and memory snapshot files torchao's settings ask for.
    data = {k: char[k] for k in ("graph", "accuracy", "memory", "profile", "kernels", "flops")}
    if char.get("compile_seconds") is not None:
        data["compile"] = {"seconds": char["compile_seconds"], "dispatch_count": None,
                           "binary_bytes": None, "flags": [f"mode={compile_mode}"]}
    results = [StageResult("characterize", data=data)]
    if measured.error:
        return [*results, StageResult("run", Status.FAILED, "run", measured.error)]
    samples = [o.data for o in measured.kept]
    timing = timing_section(measured, m)
    phases = None
    if samples and "phases_ms" in samples[0]:
        phases = {k: median([s["phases_ms"][k] for s in samples])
                  for k in samples[0]["phases_ms"]}
    # torch has no --benchmark_repetitions: its timed calls per invocation are their own field.
    timing.update(repetitions=None,
                  calls_per_invocation=int(median([s["iterations"] for s in samples])),
                  first_run_ms=char["first_run_ms"], phases_ms=phases)
    return [*results, StageResult("run", data={"timing": timing})]


def with_threads(sku: dict, log: str | None) -> dict:
    """The SKU with its torch thread count decided: `threads: 0` is what the machine can
    give the timed process now (the CPUs it may run on, less those other processes use;
    measure/disturbance.available_cpus), so that two threads do not stall at barriers
    on a machine whose other core is taken. The count used is the one recorded."""
    if sku["torch"]["threads"]:
        return sku
    threads, share = available_cpus()
    if log:
        with open(log, "a", encoding="utf-8", errors="replace") as fh:
            fh.write(f"torch threads: {threads} (other processes used "
                     f"{'an unknown share' if share is None else f'{share:.0%}'} of the CPUs)\n")
    return {**sku, "torch": {**sku["torch"], "threads": threads}}
