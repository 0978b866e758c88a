"""The torch stage: measures a batch of torch cases (one Snakemake job), following
DESIGN.md's protocol.

One worker process measures the batch (backends/torch/worker.py `batch`): the
interpreter, torch and torchao start once per batch, and each case is built,
quantized and compiled once and characterized; the cases of a group held warm at once
are then timed in interleaved rounds of invocations, children forked from that warm
process (or in-process blocks where forking is unsafe), as many as the protocol's loop
decides for each case with its own budget and target. A case that hangs or crashes the
worker is that case's failure; a new worker goes on with the cases that have no result.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from workflow.backends.builds import interpreter_versions
from workflow.backends.output import log_cap_bytes
from workflow.backends.proc import Streaming, exit_reason, first_lines, log_tail, python_env
from workflow.backends.worker_side import ended_by_own_bug, own_bug_marker
from workflow.errors import OwnBug
from workflow.jobs.iree import RUN_ID_ENV
from workflow.jobs.iree_batch import forced_by_command
from workflow.jobs.model import now_iso
from workflow.jobs.torch_journal import STORE, Journal, case_key, names_files, stopped_line
from workflow.measure.disturbance import granted_cpus, outside_share
from workflow.paths import torch_case_record
from workflow.planning.keys import sources_of
from workflow.planning.members import write_files_members
from workflow.planning.resources import GROUP_WEIGHT_BYTES, case_weight_bytes
from workflow.records.case import assemble, torch_provenance
from workflow.records.stage import StageResult
from workflow.records.storage import read_json, write_json
from workflow.stats.enums import Status


def run_pass(plan: dict, pass_name: str, cases: list[dict], *, timeout_per_case: float,
             log: str | None, finished=None, watch: Watch | None = None) -> dict[str, dict]:
    """Runs one worker pass over `cases`; returns case id -> result.

    A case that exceeds its deadline (timeout_per_case for each of its steps: a phase
    or an invocation, which the worker's "tick" lines mark; the compile budget,
    `watch.compile_budget_s`, for its torch.compile) or crashes the worker is
    recorded as failed and the pass goes on with the cases after it in a new worker,
    so one bad case never costs the batch. `finished(case_id, result)` hears of each
    case as its result arrives, a failed one too. `watch` follows which case is in
    which phase (what a stopped batch says of the case it was measuring).
    """
    results: dict[str, dict] = {}
    python = plan.get("python") or sys.executable
    watch = watch or Watch()
    remaining = list(cases)
    while remaining:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            # spawned_at: the worker's start is measured from here (its record's cost).
            json.dump({**plan, "cases": remaining, "spawned_at": time.time()}, fh)
            plan_file = fh.name
        try:
            done, stuck, why = _one_worker(python, plan_file, pass_name, timeout_per_case, log,
                                           finished, watch)
        finally:
            os.unlink(plan_file)
            own_bug_marker(plan_file).unlink(missing_ok=True)
        results.update(done)
        ended = [stuck] if stuck is not None else []
        if not done and not ended:  # the worker died before its first case: fail them all
            ended = [case["id"] for case in remaining]
        for case_id in ended:
            results[case_id] = {"status": Status.FAILED, "error": why}
            if stuck is not None and watch.phase == "compile_s":
                results[case_id]["failed_stage"] = "compile"
            if finished is not None:
                finished(case_id, results[case_id])
        watch.case = watch.phase = None
        if not done and stuck is None:
            break
        remaining = [c for c in remaining if c["id"] not in results]
    return results


# A worker ended by one of these was stopped with its job, not by its case.
STOP_SIGNALS = (-signal.SIGINT, -signal.SIGTERM)


class Watch:
    """What a batch's worker is doing: the case whose step runs, its phase (the worker's
    "phase" lines: `build_s`, `compile_s`, ...) and since when (monotonic), so that a
    batch stopped from outside names what its running case was doing; and the compile
    budget (s, None: the step's timeout alone) that holds a case's torch.compile."""

    def __init__(self, compile_budget_s: float | None = None):
        self.compile_budget_s = compile_budget_s
        self.case: str | None = None
        self.phase: str | None = None
        # A step (the deadline's start) begins at a "start" or "tick" line, a phase at
        # its "phase" line.
        self.step_since = self.phase_since = time.monotonic()

    def step(self, case: str, phase: str | None = None, *, begins: bool = True) -> None:
        now = time.monotonic()
        self.case, self.phase, self.phase_since = case, phase, now
        if begins:
            self.step_since = now

    def deadline(self, timeout: float) -> tuple[float, str | None]:
        """When the running step must end, and what is hit then (None: the step's
        timeout)."""
        budget = self.compile_budget_s
        if self.phase == "compile_s" and budget is not None \
                and self.phase_since + budget < self.step_since + timeout:
            return self.phase_since + budget, f"compile budget of {budget:g} s hit"
        return self.step_since + timeout, None


def _one_worker(python: str, plan_file: str, pass_name: str, timeout: float,
                log: str | None, finished=None, watch: Watch | None = None):
    """Runs a worker until it ends; returns (results, id of a case it hung or crashed
    on, why). The model runs in the worker and may end it any way (os._exit, sys.exit,
    with any status, OWN_BUG_EXIT included; a signal): that is the case's failure with
    the exit status and the worker's last lines. Only the worker's own-bug marker beside
    its plan (worker_side.marking_own_bug) makes the exit benchflow's bug: OwnBug, the job fails."""
    results: dict[str, dict] = {}
    watch = watch or Watch()
    current = None
    watch.step_since = time.monotonic()
    with Streaming([python, "-m", "workflow.backends.torch.worker", plan_file, pass_name],
                   log=log, env=python_env(python)) as worker:
        try:
            while True:
                deadline, hit = watch.deadline(timeout)
                left = deadline - time.monotonic()
                if left <= 0:
                    worker.kill()
                    return results, current, (
                        f"{hit} (timeouts.torch_compile_s) while compiling with "
                        f"torch.compile ({pass_name})" if hit else
                        f"timeout after {timeout:g} s ({pass_name})")
                line = worker.readline(min(left, 1.0))
                if line is None:
                    continue
                if not line:
                    break
                msg = json.loads(line)
                if msg["event"] == "start":
                    current = msg["case"]
                    watch.step(current)
                elif msg["event"] == "phase":  # a phase begins: what the case is doing
                    watch.step(msg["case"], msg["phase"], begins=False)
                elif msg["event"] == "tick":  # a phase or an invocation done: a new step
                    watch.step(msg["case"])
                elif msg["event"] == "result":
                    results[msg["case"]] = msg["result"]
                    current = None
                    if finished is not None:
                        finished(msg["case"], msg["result"])
            code = worker.wait()
            if code in STOP_SIGNALS:
                # Signalled from outside with the job (SLURM signals every process of a
                # job at its time limit): the batch is stopped, not the case failed.
                raise SystemExit(128 - code)
            if ended_by_own_bug(code, plan_file):
                tail = log_tail(log, 4000)
                raise OwnBug(f"benchflow's own code failed in the torch worker ({pass_name}, "
                             f"case {current}):\n{tail}")
            if current is not None or code != 0:
                tail = log_tail(log, 2000)
                return results, current, first_lines(
                    f"torch worker {exit_reason(code)} ({pass_name}):\n{tail}")
            return results, None, ""
        finally:
            _note_log_cut(results, worker.log_cut, log)


def _note_log_cut(results: dict[str, dict], cut: int, log: str | None) -> None:
    """A worker whose output passed the log's cap (a model that prints without end): its
    cases' records say so (provenance.log_cut), as its log does."""
    if cut:
        note = (f"log cut at {log_cap_bytes() / (1 << 20):g} MiB: {cut} bytes of the "
                f"worker's output left out of {log}")
        for result in results.values():
            result["log_cut"] = note


def printable_line(line: str) -> str:
    """A line for the terminal, a model's error text in it with its control characters
    escaped (render/text.printable)."""
    from workflow.render.text import printable

    return printable(line)


def case_done_line(case_id: str, result: dict, done: int, total: int, seconds: float) -> str:
    """A torch batch's line as one of its cases finishes: a batch of hours is otherwise
    silent until its last case (the progress shows cases from the finished batch)."""
    head = f"torch {done} of {total} done ({seconds:.0f} s into the batch): {case_id}"
    if result.get("status") == Status.FAILED or result.get("error"):
        why = (str(result.get("error") or "").strip().splitlines() or ["no reason given"])[0]
        return f"{head} failed: {why}"
    if result.get("status") not in (None, Status.OK):
        return f"{head} {result['status']}: {result.get('reason') or result.get('error')}"
    median = (result.get("timing") or {}).get("median_ms")
    if median is None:
        return f"{head} not timed: {result.get('run_error') or 'no timing'}"
    return f"{head} median {median:.4g} ms"


def run_torch_batch(*, cases: list[dict], backends: dict[str, dict], sku: dict, tolerances: dict,
                    timeout_per_case: float, out_dir: str, log: str,
                    targets: dict[str, dict] | None = None, say=None,
                    content: dict | None = None,
                    compile_budget_s: float | None = None) -> list[dict]:
    """Measures a batch and writes one case record per case (paths.torch_case_record).
    Golden verdicts are added at aggregation, so blessing never re-measures a batch;
    `targets` (case id -> {rel_width, source}) is the interval width a case judged by a
    golden needs (planning/targets.py), which only decides when it has measured enough.
    `backends`: the torch backends' settings by name. `say(line)` hears a line per case
    as the worker finishes it (case_done_line). `content`: the batch's content param (in
    each case's key); `compile_budget_s`: timeouts.torch_compile_s.

    Each case's record is kept in the batch's journal as soon as it is measured
    (jobs/torch_journal.py): a batch stopped part way (a time limit, Ctrl-C, a crash)
    keeps its finished cases, its rerun measures only the others, unless the run was
    forced (--forcerun run_torch, --forceall)."""
    # No batch directory before every case has a record (_write_outputs; see there).
    out, m, sku, journal = Path(out_dir), sku["measurement"], with_threads(sku, log), \
        Journal(out_dir)
    plan = {"backends": backends, "threads": sku["torch"]["threads"], "measurement": m,
            "tolerances": tolerances, "artifacts_dir": str(journal.artifacts),
            "python": sku["torch"].get("python")}
    timeouts = {"run_s": timeout_per_case, "torch_compile_s": compile_budget_s}
    key = {c["id"]: case_key(c, backends[c["backend"]], sku, tolerances, content)
           for c in cases}
    reused = _reusable(journal, cases, key, timeouts, forced_by_command(out_dir, "run_torch"),
                       log)
    t0, by_id, got_ids = time.monotonic(), {c["id"]: c for c in cases}, set()
    common = {**interpreter_provenance(plan["python"], log), "started_at": now_iso()}

    def finished(case_id: str, result: dict) -> None:
        journal.keep(by_id[case_id]["identity"], key[case_id],
                     _record(by_id[case_id], result, sku, common), timeouts)
        if say is not None:
            say(case_done_line(case_id, result, len(reused) + len(got_ids) + 1, len(cases),
                               time.monotonic() - t0))
        got_ids.add(case_id)

    # Cases held warm at once (their invocations interleaved): as many as fit
    # GROUP_WEIGHT_BYTES of weights by their estimate (resources.case_weight_bytes).
    plan["group_bytes"] = GROUP_WEIGHT_BYTES
    watch = Watch(compile_budget_s)
    todo = [{**c, "target": (targets or {}).get(c["id"]),
             "weight_bytes": case_weight_bytes(c["workload"])}
            for c in cases if c["id"] not in reused]
    try:
        got = run_pass(plan, "batch", todo, timeout_per_case=timeout_per_case, log=log,
                       finished=finished, watch=watch) if todo else {}
    except (SystemExit, KeyboardInterrupt) as exc:
        _stopped(journal, watch, by_id, key, exc, len(reused) + len(got_ids), len(cases), log)
        raise
    records = [reused[c["id"]] if c["id"] in reused else _record(c, got[c["id"]], sku, common)
               for c in cases]
    _write_outputs(out, cases, records, journal, {c["id"]: key[c["id"]] for c in cases},
                   timeouts, {
        "cases": [c["id"] for c in cases], "seconds": time.monotonic() - t0,
        "threads": plan["threads"], "threads_decided": sku["torch"].get("threads_decided"),
        "reused": [c["id"] for c in cases if c["id"] in reused]})
    return records


def _record(case: dict, got: dict, sku: dict, common: dict) -> dict:
    """A case's record from its worker's result; `common`: the batch's provenance (its
    interpreter, when it started). With the model's source files by digest, as an IREE
    case's (jobs/iree.py)."""
    return assemble(case["identity"], torch_results(got, case["identity"]["compile_mode"]),
                    {**torch_provenance(sku, got), **common,
                     "model_sources": sources_of(case["workload"])})


def _write_outputs(out: Path, cases: list[dict], records: list[dict], journal: Journal,
                   key: dict[str, str], timeouts: dict, batch: dict) -> None:
    """The batch's outputs, assembled from its journal and its worker's results: the
    case records, the profiler files, batch.json, the members file; then each case's
    entry goes to the SKU's store (Journal.others: a batch cut again later reuses it)
    and the journal goes (the outputs hold every case now). The batch directory is made aside and
    renamed into place whole, not before: a job stopped earlier leaves none, where
    Snakemake would keep one marked incomplete and refuse the same command again
    (without --rerun-incomplete)."""
    aside = out.with_name(out.name + ".assembling")
    shutil.rmtree(aside, ignore_errors=True)
    aside.mkdir(parents=True)
    journal.move_artifacts(aside, records, out)
    for case, data in zip(cases, records, strict=True):
        path = Path(torch_case_record(str(aside), case["identity"]))
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, data)
    write_json(aside / "batch.json", batch)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(aside, out)
    # Beside the batch directory: what the Snakefile checks before the next run.
    write_files_members(str(out), {c["id"]: torch_case_record(str(out), c["identity"])
                                   for c in cases})
    store = Journal(out, journal.dir.parent / STORE)
    for case, data in zip(cases, records, strict=True):
        if not names_files(data):
            store.keep(case["identity"], key[case["id"]], data, timeouts)
    journal.clear()


def _reusable(journal: Journal, cases: list[dict], key: dict, timeouts: dict, forced: bool,
              log: str) -> dict[str, dict]:
    """The records that verify (Journal.reusable) of an earlier, stopped run of the
    batch, else of an earlier run of another of the SKU's batches or of this one
    (Journal.others), by case id; none when the run was forced. One log line per case
    saying whether it is reused or measured, and why."""
    reused, others = {}, journal.others()
    with open(log, "a", encoding="utf-8", errors="replace") as fh:
        for case in cases:
            record, why = journal.reusable(case["identity"], key[case["id"]], timeouts)
            for other in others if record is None else ():
                found, _ = other.reusable(case["identity"], key[case["id"]], timeouts)
                if found is not None and not names_files(found):
                    record, why = found, (f"reused: measured by an earlier run of the "
                                          f"SKU's batches ({other.path(case['identity'])})")
                    break
            if record is not None and not forced:
                reused[case["id"]] = record
            elif record is not None:
                why = "measuring again: the rerun was forced"
            else:
                why = "measuring" if why == "not measured yet" else f"measuring again: {why}"
            print(f"{case['id']}: {why}", file=fh, flush=True)
    return reused


def _stopped(journal: Journal, watch: Watch, by_id: dict, key: dict, exc: BaseException,
             kept: int, total: int, log: str) -> None:
    """A batch stopped from outside (jobs/job.py: SIGTERM, Ctrl-C; its worker is killed
    already): the case it was measuring gets a journal entry saying what it was doing,
    the job's stderr and log a line saying what is kept."""
    code = 130 if isinstance(exc, KeyboardInterrupt) else exc.code
    line = f"torch batch stopped: {kept} of {total} cases kept in {journal.dir}"
    if watch.case in by_id:
        why = stopped_line(code, time.monotonic() - watch.phase_since, watch.phase)
        journal.stopped(by_id[watch.case]["identity"], key[watch.case], why)
        line += f"; {watch.case} was {why}"
    line += f"; the rerun measures the other {total - kept}"
    print(line, file=sys.stderr, flush=True)
    with open(log, "a", encoding="utf-8", errors="replace") as fh:
        print(line, file=fh)


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


def torch_results(got: dict, compile_mode: str | None) -> list[StageResult]:
    """A torch case's stage results for the one case assembler from its worker's result:
    `characterize` (graph, accuracy, memory, profile, kernels, torch.compile's first
    call, the cost per phase), then `run` (the timing statistics of its invocations,
    measure/protocol.py's). Failures of either are recorded at stage `run`."""
    status = got.get("status")
    if status == Status.UNSUPPORTED:
        return [StageResult("characterize", Status.UNSUPPORTED, error=got["reason"])]
    if status != Status.OK:
        return [StageResult("characterize", Status.FAILED, got.get("failed_stage") or "run",
                            got.get("error", "unknown error"))]
    # `kernels`: the per-op profile (backends/torch/ops_profile.py), apart from `profile`,
    # the Chrome trace and memory snapshot files torchao's settings ask for.
    data = {k: got.get(k) for k in ("graph", "accuracy", "memory", "profile", "kernels",
                                    "flops", "cost")}
    if got.get("compile_seconds") is not None:
        data["compile"] = {"seconds": got["compile_seconds"], "dispatch_count": None,
                           "binary_bytes": None, "flags": [f"mode={compile_mode}"]}
    results = [StageResult("characterize", data=data)]
    if got.get("run_error"):
        return [*results, StageResult("run", Status.FAILED, "run", got["run_error"])]
    timing = {**got["timing"], "first_run_ms": got["first_run_ms"]}
    return [*results, StageResult("run", data={"timing": timing})]


def with_threads(sku: dict, log: str | None) -> dict:
    """The SKU with its torch thread count decided. `threads: 0` is every CPU the process
    is granted (its affinity and cgroup CPU quota: measure/disturbance.granted_cpus),
    never a count read from other processes' load, which changed from one rerun of
    unchanged code to the next and the level with it. It is decided once per suite
    run, by the run's first torch batch, and every batch of the run uses that count
    (run_threads), so that two cases of one run are never measured at different
    counts even where nodes grant different CPUs. The count used, and how it was
    decided, are recorded; the load seen then is recorded beside it as a disturbance."""
    if sku["torch"]["threads"]:
        return {**sku, "torch": {**sku["torch"], "threads_decided": "the SKU's torch.threads"}}
    threads, how = run_threads()
    if log:
        with open(log, "a", encoding="utf-8", errors="replace") as fh:
            fh.write(f"torch threads: {threads} ({how})\n")
    return {**sku, "torch": {**sku["torch"], "threads": threads, "threads_decided": how}}


# The run's decision of `threads: 0`, one file per run id (RUN_ID_ENV, set by the
# Snakefile's main process and inherited by every job, SLURM's too).
THREADS_DIR = Path(".snakemake") / "benchflow" / "torch-threads"


def run_threads(directory: Path | None = None) -> tuple[int, str]:
    """This run's torch thread count for `threads: 0` and how it was decided: read from
    the run's file, or decided now (available_cpus) and written there first, so that
    the run's later batches, on this machine or another node, find it. Outside a
    Snakemake run (no run id) it is decided for this batch alone."""
    run_id = os.environ.get(RUN_ID_ENV)
    path = (directory or THREADS_DIR) / f"{run_id}.json" if run_id else None
    if path is not None and path.is_file():
        got = read_json(path)
        return int(got["threads"]), got["how"]
    threads, share = granted_cpus(), outside_share()
    seen = "an unknown share" if share is None else f"{share:.0%}"
    when = "the run's first torch batch" if path else "this batch"
    how = (f"threads: 0, the {threads} CPU(s) this process is granted (affinity and cgroup "
           f"CPU quota), decided when {when} started; other processes then used {seen} of "
           "them (a disturbance, recorded, not an input)")
    if path is None:
        return threads, how
    path.parent.mkdir(parents=True, exist_ok=True)
    # The first writer wins, whole: written aside, then linked into place (link fails
    # where the file exists), so that two batches of one run agree and neither reads a
    # file the other is still writing (SLURM runs batches at once).
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as fh:
        json.dump({"threads": threads, "how": how}, fh)
    try:
        os.link(fh.name, path)
    except FileExistsError:
        return run_threads(directory)
    finally:
        os.unlink(fh.name)
    return threads, how
