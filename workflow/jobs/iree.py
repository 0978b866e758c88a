"""The IREE stages: export, compile, run, verify and the case record, run one after
the other by one Snakemake job per case (`case_job`). Failures follow jobs/model.py:
a tool's failure is a recorded result, a bug in benchflow fails the job.

One job per case, not one per stage (DESIGN.md, "One job per IREE case"): Snakemake
spends about half a millisecond planning each job, so five jobs per case made a dry run
of 10,000 cases take ten times as long as 10,000 trivial jobs. Nothing is redone for it:
an export is shared by every SKU's job of its workload through a content key (the
export spec and the torch and IREE compiler versions) checked under a file lock, and the
job's params hold exactly what decides its compile, run and verification.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from workflow.backends.iree import gpu_chip
from workflow.backends.iree import tools as iree
from workflow.backends.iree.profile import compile_statistics
from workflow.backends.proc import run_python, run_tool, tool_path
from workflow.backends.worker_side import own_bug_marker
from workflow.errors import OwnBug, StageError
from workflow.jobs import export_cache
from workflow.jobs.cases import write_case
from workflow.jobs.kernels import compiled_kernels, profiled_kernels
from workflow.jobs.model import not_run, run_stage
from workflow.measure.cost import Cost
from workflow.measure.disturbance import Probe
from workflow.measure.layout import env_padding, fresh_module
from workflow.measure.protocol import Observation, measure_one, timing_section
from workflow.models.registry import tolerance_for
from workflow.planning import keys
from workflow.planning.targets import gate_mde
from workflow.records.stage import StageResult
from workflow.records.storage import fingerprint, fingerprint_problem, read_json
from workflow.stats.accuracy import compare

RUN_ID_ENV = "BENCHFLOW_RUN_ID"


def export_reuse_problem(prior: StageResult | None, parts: dict, timeout: float,
                         retry_failures: bool) -> str | None:
    """Why an export on disk cannot be reused for the key of `parts`, or None when it can:
    its key must match and each file it made must still have the bytes it had. A failed
    export is shared by the SKUs of one run (a model that cannot be exported is tried
    once), but tried again with another timeout, and by a forced rerun (`retry_failures`)
    unless that same run already tried it."""
    if prior is None:
        return "not exported yet"
    if prior.data.get("key") != keys.digest(parts):
        return "its inputs changed: " + keys.changed_parts(prior.data.get("parts"), parts)
    if not prior.ok:
        if prior.data.get("timeout_s") != timeout:
            return f"it failed with timeout {prior.data.get('timeout_s')} s, now {timeout:g} s"
        run = os.environ.get(RUN_ID_ENV)
        if retry_failures and (run is None or prior.data.get("run_id") != run):
            return "it failed in an earlier run, and this rerun was forced"
        return None
    for path, fp in (prior.data.get("files") or {}).items():
        problem = fingerprint_problem(path, fp)
        if problem:
            return f"{path}: {problem}"
    return None if prior.data.get("files") else "its files were not fingerprinted"


def export(*, spec: dict, timeout: float, mlir: str, inputs: str, reference: str, meta: str,
           log: str, retry_failures: bool = False) -> StageResult:
    """The workload's export, made once and shared by every SKU's case job: under a lock,
    an export whose content key matches and whose files verify is reused
    (export_reuse_problem), else it is made again, saying why in the log."""
    from filelock import FileLock

    parts = keys.export_parts(spec)
    key = keys.digest(parts)
    artifacts = [mlir, inputs, reference]
    Path(meta).parent.mkdir(parents=True, exist_ok=True)
    with FileLock(meta + ".lock"):
        try:
            prior = StageResult.read(meta)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            prior = None  # none yet, or unreadable: export again
        problem = export_reuse_problem(prior, parts, timeout, retry_failures)
        with open(log, "a", encoding="utf-8", errors="replace") as fh:
            fh.write(f"export {key}: " + (f"reused from {meta} ({prior.status})\n"
                                          if problem is None else f"exporting ({problem})\n"))
        if problem is None:
            return prior

        made: dict = {}

        def body():
            # With an export cache (jobs/export_cache.py), an export of this key made in
            # another suite directory is copied, verified, instead of made again.
            files = dict(zip(export_cache.ROLES, artifacts, strict=True))
            cached = export_cache.copy_in(key, parts, files, log)
            if cached is not None:
                return cached
            with tempfile.TemporaryDirectory() as tmp:
                side = Path(tmp) / "export.json"
                done = _export_worker([json.dumps(spec), mlir, inputs, reference, str(side)],
                                      side, timeout, log)
                made.update(done, spec=spec, dtype=spec["dtype"])
                return dict(made)

        result = run_stage("export", meta, artifacts, [], body)
        # What the reuse check reads: the key and its parts, the files' fingerprints, and
        # for a failure the timeout and the run that tried.
        result.data.update(key=key, parts=parts, timeout_s=timeout,
                           run_id=os.environ.get(RUN_ID_ENV),
                           files={a: fingerprint(a) for a in artifacts} if result.ok else {})
        result.write(meta)
        if result.ok and made:  # made here (not copied), and successful: shared by the cache
            export_cache.keep(key, parts, {role: {"path": a, **result.data["files"][a]}
                                           for role, a in zip(export_cache.ROLES, artifacts,
                                                              strict=True)}, made, log)
        return result


def _export_worker(args: list[str], side: Path, timeout: float, log: str) -> dict:
    """Runs the export worker (backends/iree/export.py) and returns what it wrote to
    `side`. The model's code runs in that process and may end it any way (os._exit or
    sys.exit in its forward, with any status, a signal): each is the export's recorded
    failure with the exit status and the worker's own lines, so that the other cases of
    the batch go on and a rerun reuses the failure. Only the worker's own-bug file makes
    an exit benchflow's bug (OwnBug: the job fails)."""
    argv = [sys.executable, "-m", "workflow.backends.iree.export", *args]
    try:
        run_tool(argv, stage="export", timeout=timeout, log=log)
    except StageError as exc:
        if own_bug_marker(side).exists():
            raise OwnBug(f"benchflow's own code failed in the export worker: {exc.message}"
                         ) from None
        raise
    if not side.exists():
        raise StageError("export", "the export worker exited with 0 without writing its "
                                   "result: the model's code ended the process (sys.exit "
                                   "or os._exit in its build or forward?)")
    return read_json(side)


def compile_module(*, mlir: str, export_meta: str | None = None, sku: dict, timeout: float,
                   vmfb: str, meta: str, log: str, flags: list[str] | None = None) -> StageResult:
    """iree-compile with the SKU's flags, or with `flags` (benchmark files bring their own);
    `export_meta` is the upstream stage when there is one."""
    def body():
        nonlocal flags
        flags = flags if flags is not None else iree.compile_flags(sku)
        with tempfile.TemporaryDirectory() as tmp:
            stats_file = Path(tmp) / "statistics.csv"
            argv = iree.compile_argv(sku_tool(sku, "compile_tool"), mlir, vmfb, flags,
                                     str(stats_file))
            t0 = time.monotonic()
            run_tool(argv, stage="compile", timeout=timeout, log=log)
            seconds = time.monotonic() - t0
            # The tool's file: its bytes decoded with replacement, its shape checked.
            try:
                stats = compile_statistics(
                    stats_file.read_text(encoding="utf-8", errors="replace"))
            except (OSError, ValueError) as exc:
                raise StageError("compile", f"unreadable iree-compile statistics: {exc}"
                                 ) from None
        # `kernels`: the dispatch list a compile-only case keeps (records/case.assemble).
        return {"seconds": seconds, "binary_bytes": os.path.getsize(vmfb), "flags": flags,
                "compiler_version": sku_compiler_version(sku),
                "dispatch_count": stats["dispatch_count"],
                "executable_count": stats["executable_count"],
                "kernels": compiled_kernels(stats, sku["measurement"]),
                # Every dispatch function, uncapped (no record field: `kernels` keeps the
                # top few): what a GPU profile's kernels are joined to (gpu_kernels.py).
                "dispatch_names": [d["name"] for d in stats["dispatches"]]}

    return run_stage("compile", meta, [vmfb], [export_meta] if export_meta else [], body)


TOOLS = {"compile_tool": "iree-compile", "benchmark_tool": "iree-benchmark-module"}


def sku_tool(sku: dict, which: str) -> str:
    """The SKU's own build of an IREE tool (iree.compile_tool / iree.benchmark_tool),
    else the one installed beside benchflow: two builds of IREE become two SKUs."""
    if sku["iree"].get(which):
        return sku["iree"][which]
    return iree.benchmark_tool() if which == "benchmark_tool" else tool_path(TOOLS[which])


def sku_compiler_version(sku: dict) -> str | None:
    """The version of the compiler a SKU uses: the installed one's (tools.compiler_version),
    or what the SKU's own build says of itself (`--version`)."""
    if not sku["iree"].get("compile_tool"):
        return iree.compiler_version()
    return iree.tool_version(sku["iree"]["compile_tool"])


def benchmark_run(argv: list[str], timeout: float, log: str,
               env: dict | None = None) -> iree.BenchmarkRun:
    proc = run_tool(argv, stage="run", timeout=timeout, log=log, env=env)
    try:
        return iree.parse_benchmark_json(proc.stdout)
    except (ValueError, KeyError) as exc:
        raise StageError("run", f"unreadable iree-benchmark-module output: {exc}") from None


def run_iree(*, vmfb: str, compile_meta: str, export_meta: str, inputs: str, sku: dict,
             timeout: float, timing: str, log: str, gate: dict | None = None,
             cost: Cost | None = None) -> StageResult:
    """Times a module with iree-benchmark-module, one fresh process per invocation, then
    profiles it once (its `kernels`, never part of the timing); `cost` gets the seconds
    of each (invocations_s, profile_s)."""
    m = sku["measurement"]
    cost = cost or Cost()

    def body():
        dtypes = [i["dtype"] for i in read_json(export_meta)["inputs"]]
        tool = sku_tool(sku, "benchmark_tool")
        with tempfile.TemporaryDirectory() as tmp:
            args = iree.write_input_files(inputs, dtypes, Path(tmp))
            with cost.phase("invocations_s"):
                out = measure(lambda **kw: iree.benchmark_argv(tool, vmfb, "main", args, sku,
                                                               **kw), m, timeout, log, gate,
                              seed=vmfb)
            # After the timing, apart from it (jobs/kernels.py): the inputs still exist.
            with cost.phase("profile_s"):
                names = read_json(compile_meta).get("dispatch_names")
                return {**out, "kernels": profiled_kernels(out["command"], m, timeout, log,
                                                           dispatches=names)}

    return run_stage("run", timing, [], [compile_meta], body)


def iree_invocation(argv: list[str], timeout: float, log: str, m: dict,
                    layout: random.Random | None = None) -> Observation:
    """One fresh iree-benchmark-module process, observed for disturbance. With a
    `layout` generator, the process maps a fresh copy of its module at a random path
    and starts with a random environment size (measure/layout.py: a persistent layout
    bias between identical modules becomes noise the interval covers)."""
    env = None
    with tempfile.TemporaryDirectory() as tmp:
        if layout is not None:
            argv = [f"--module={fresh_module(a[len('--module='):], Path(tmp), layout)}"
                    if a.startswith("--module=") else a for a in argv]
            env = env_padding(layout)
        with Probe(m["disturbed_share"]) as probe:
            run = benchmark_run(argv, timeout, log, env)
    return Observation(run.median_ms, run, probe.result())


def measure(argv_for: Callable[..., list[str]], m: dict, timeout: float, log: str,
            gate: dict | None = None, seed: str = "") -> dict:
    """The measurement protocol of one module (DESIGN.md): a first call of a fresh process,
    then fresh-process invocations as measure/protocol.py decides (fixed or adaptive
    counts, noisy reruns, retakes of disturbed invocations). `argv_for(repetitions=,
    warmup_s=, min_time=)` builds the iree-benchmark-module command; `seed` the layout
    randomization's (the case's id: reproducible). With the suite's `goldens` settings
    (`gate`), the timing also holds the minimum detectable effect of the golden gate
    (mde_ratio)."""
    start = time.monotonic()
    # The first call of a fresh process, without warm-up: one iteration.
    first = benchmark_run(argv_for(repetitions=1, warmup_s=0, min_time="1x"), timeout, log)
    argv = argv_for(repetitions=m["repetitions"], warmup_s=m["min_warmup_time_s"],
                    min_time=f"{m['min_time_s']:g}s")
    layout = random.Random(seed) if m["randomize_layout"] else None
    member = measure_one(lambda: iree_invocation(argv, timeout, log, m, layout), m)
    runs = [o.data for o in member.kept]
    # Peak RSS over this job's children, which are only the benchmark processes.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    timing_stats = timing_section(member, m)
    timing_stats["mde_ratio"] = gate_mde(timing_stats["cv"], len(runs), gate)
    timing_stats["invocation_kind"] = "process"
    timing_stats.update(
        repetitions=m["repetitions"], first_run_ms=first.median_ms,
        repetition_cv=[r.cv for r in runs],
        # Each invocation's mean, as sharktank's single-run check reads it (for comparison):
        # Google Benchmark's `mean` aggregate; with a single repetition (no aggregates)
        # that repetition's time, itself the mean over its iterations; else null, never
        # a median in its place.
        invocation_means_ms=[
            r.aggregates_ms.get("mean",
                                r.repetition_ms[0] if len(r.repetition_ms) == 1 else None)
            for r in runs],
        # The iterations of each repetition are not recorded (Timing.calls_per_invocation).
        calls_per_invocation=None,
        warmup_s=m["min_warmup_time_s"], min_time_s=m["min_time_s"],
    )
    return {"timing": timing_stats, "memory": {"peak_bytes": peak, "kind": "rss"},
            "contexts": [r.context for r in runs],
            "command": argv, "runtime_version": iree.runtime_version(),
            # Its wall time, first call included (against it, the profile's cost:
            # tests/perf/profile_cost.py); the record has no field for it.
            "measuring_s": time.monotonic() - start,
            # The SLURM job that measured (None outside SLURM): the case record is
            # written later, by a local rule, where no job id exists.
            "slurm_job_id": os.environ.get("SLURM_JOB_ID")}


def verify_iree(*, vmfb: str, compile_meta: str, export_meta: str, inputs: str,
                reference: str, sku: dict, tolerances: dict, timeout: float, accuracy: str,
                log: str) -> StageResult:
    def body():
        # The suite's tolerance for the dtype, with the model's own min_pcc where it has one.
        tolerance = tolerance_for(read_json(export_meta)["spec"], tolerances)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "outputs.npz"
            run_python("workflow.backends.iree.verify",
                       [vmfb, inputs, sku["iree"]["device"], str(out)],
                       stage="verify", timeout=timeout, log=log)
            with np.load(out) as got, np.load(reference) as ref:
                n = len([k for k in ref.files if k.startswith("out")])
                actual = [got[f"out{i}"] for i in range(n)]
                expected = [ref[f"out{i}"] for i in range(n)]
                first_call_ms = float(got["first_call_ms"])
        try:
            result = compare(actual, expected, **tolerance)
        except ValueError as exc:
            raise StageError("verify", str(exc)) from None
        return {"accuracy": {**result, "reference": "torch-eager-fp32"},
                "first_call_ms": first_call_ms}

    return run_stage("verify", accuracy, [], [compile_meta], body)


def case_export(*, spec: dict, identity: dict, timeouts: dict, log: str,
                retry_failures: bool = False) -> StageResult:
    """The export of an IREE case's workload (export: made once, shared by its SKUs)."""
    mlir, inputs, reference, meta = _stage_files(identity)[:4]
    return export(spec=spec, timeout=timeouts["export_s"], mlir=mlir, inputs=inputs,
                  reference=reference, meta=meta, log=log, retry_failures=retry_failures)


def case_files(identity: dict) -> dict[str, str]:
    """The files an IREE case is made of (stage name -> path): its export's module, inputs
    and reference, its compiled module, and its record. They are fingerprinted when the
    record is written and checked before it is reused."""
    from workflow.paths import (
        CASE,
        COMPILE_VMFB,
        EXPORT_INPUTS,
        EXPORT_MLIR,
        EXPORT_REFERENCE,
    )

    w, sku = identity["workload"], identity["sku"]
    return {"record": CASE.format(sku=sku, backend="iree", workload=w,
                                  recipe=identity["recipe"]),
            "mlir": EXPORT_MLIR.format(workload=w), "inputs": EXPORT_INPUTS.format(workload=w),
            "reference": EXPORT_REFERENCE.format(workload=w),
            "vmfb": COMPILE_VMFB.format(sku=sku, workload=w)}


def _stage_files(identity: dict) -> tuple[str, ...]:
    """An IREE case's stage files: its export's module, inputs, reference and meta, then
    its compiled module, compile meta, timing and accuracy."""
    from workflow import paths as p

    w, sku = identity["workload"], identity["sku"]
    return (*(f.format(workload=w) for f in (p.EXPORT_MLIR, p.EXPORT_INPUTS,
                                             p.EXPORT_REFERENCE, p.EXPORT_META)),
            *(f.format(sku=sku, workload=w) for f in (p.COMPILE_VMFB, p.COMPILE_META,
                                                      p.IREE_BASELINE_RUN_TIMING,
                                                      p.IREE_BASELINE_VERIFY_ACCURACY)))


def case_job(*, spec: dict, identity: dict, sku: dict, tolerances: dict, timeouts: dict,
             gate: dict, key: str, case: str, log: str, retry_failures: bool = False,
             chip_choice: gpu_chip.ChipChoice | None = None, exported_s: float = 0.0) -> dict:
    """One IREE case, start to finish: export (shared), compile, run, verify, then the
    case record. Each stage writes its own JSON, so a failed case names its stage and a
    user can read every step. `chip_choice`: what the SKU's `target_chip: auto` became
    on this machine (gpu_chip.resolve_auto_chip; `sku` holds its chip), recorded in the
    case's provenance; a choice of no chip makes the case unsupported with its reason.
    `exported_s`: seconds its batch spent making its export ahead, beside the batch's
    other exports (iree_batch.export_ahead), counted in its cost's export_s."""
    mlir, inputs, reference, export_meta, vmfb, compile_meta, timing, accuracy = \
        _stage_files(identity)
    # A case measured again starts from nothing: should this job fail (a bug of ours),
    # no earlier result of the case is left to pass for the new one.
    for path in (compile_meta, timing, accuracy, case):
        Path(path).unlink(missing_ok=True)
    for path in (log, vmfb, timing, accuracy, case):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    provenance = {"job_key": key, "model_sources": keys.sources_of(spec),
                  **_chip_provenance(chip_choice, log)}
    if chip_choice is not None and chip_choice.chip is None:
        # Nothing to compile for: no GPU here, or one older than every target the
        # compiler accepts. Not compile-only, which would judge the code of a chip nobody
        # chose: unsupported, with the reason (records/case.assemble gives that status to
        # a case whose every stage found no device to run on). The shared export is not
        # made for it.
        why = f"target_chip {gpu_chip.AUTO_CHIP!r}: {chip_choice.reason}"
        for stage, path in (("compile", compile_meta), ("run", timing), ("verify", accuracy)):
            not_run(stage, path, [], why)
        return _write_case(identity, sku, [compile_meta, timing, accuracy], case, gate,
                           provenance, {"total_s": 0.0})
    clock = Cost()
    clock.add("export_s", exported_s)
    with clock.phase("export_s"):
        case_export(spec=spec, identity=identity, timeouts=timeouts, log=log,
                    retry_failures=retry_failures)
    with clock.phase("compile_s"):
        compile_module(mlir=mlir, export_meta=export_meta, sku=sku,
                       timeout=timeouts["compile_s"], vmfb=vmfb, meta=compile_meta, log=log)
    # Decided here, on the machine that would measure: without the SKU's device (a GPU
    # target on a CPU-only machine) the case is compiled only (status compile-only).
    absent = iree.device_absent_reason(sku["iree"]["device"])
    if not (absent and not_run("run", timing, [compile_meta], absent)):
        run_iree(vmfb=vmfb, compile_meta=compile_meta, export_meta=export_meta, inputs=inputs,
                 sku=sku, timeout=timeouts["run_s"], timing=timing, log=log, gate=gate,
                 cost=clock)
    if not (absent and not_run("verify", accuracy, [compile_meta], absent)):
        with clock.phase("accuracy_s"):
            verify_iree(vmfb=vmfb, compile_meta=compile_meta, export_meta=export_meta,
                        inputs=inputs, reference=reference, sku=sku, tolerances=tolerances,
                        timeout=timeouts["verify_s"], accuracy=accuracy, log=log)
    # The model's source files by digest (in `provenance`): what `compare` names when a
    # model was edited between two runs (regression/explain.py).
    return _write_case(identity, sku, [export_meta, compile_meta, timing, accuracy], case,
                       gate, provenance,
                       {**clock.seconds, "total_s": sum(clock.seconds.values())})


def _chip_provenance(choice: gpu_chip.ChipChoice | None, log: str) -> dict:
    """What a case's provenance records of its SKU's `target_chip: auto` (nothing for a
    SKU naming its chip), the choice's reason also written to the case's log."""
    if choice is None:
        return {}
    with open(log, "a", encoding="utf-8", errors="replace") as fh:
        fh.write(f"target_chip {gpu_chip.AUTO_CHIP}: {choice.reason}\n")
    out = {"target_chip": choice.provenance()}
    if choice.gpu is not None:
        # The key the dashboard names a GPU case's runner by (records/case.py's
        # TORCH_GPU_KEYS, which torch cases record alike).
        out["gpu_name"] = choice.gpu.name
    return out


def _write_case(identity: dict, sku: dict, stages: list[str], case: str, gate: dict,
                provenance: dict, cost: dict) -> dict:
    """The case record of an IREE case's stage files, judged against the goldens as they
    are now (not a job input: blessing must not re-measure); the report step judges
    every IREE case again with the goldens then."""
    from workflow.regression.goldens import golden_path

    goldens = golden_path(gate["dir"], identity["sku"])
    return write_case(case=case, identity=identity, sku=sku, stages=stages,
                      goldens=str(goldens) if goldens.exists() else None, gate=gate,
                      provenance=provenance, cost=cost)

