"""The IREE stages: export, compile, run, verify and the case record, run one after
the other by one Snakemake job per case (`case_job`). Failures follow stages/model.py:
a tool's failure is a recorded result, a bug in benchflow fails the job.

One job per case, not one per stage (DESIGN.md, "One job per IREE case"): Snakemake
spends about half a millisecond planning each job, so five jobs per case made a dry run
of 10,000 cases take ten times as long as 10,000 trivial jobs. Nothing is redone for it:
an export is shared by every SKU's job of its workload through a content key (the
export spec and the torch and IREE compiler versions) checked under a file lock, and the
job's params hold exactly what decides its compile, run and verification.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from workflow.backends.iree import tools as iree
from workflow.backends.proc import run_python, run_tool, tool_path
from workflow.errors import StageError
from workflow.models.registry import tolerance_for
from workflow.records.stage import StageResult
from workflow.records.storage import read_json, write_json
from workflow.stages.cases import write_case
from workflow.stages.model import not_run, run_stage
from workflow.stats import summary as stats
from workflow.stats.accuracy import compare


def export_key(spec: dict) -> str:
    """What an exported module depends on: its spec and the versions of the tools that
    made it (torch traces, the IREE compiler's FX importer writes the MLIR)."""
    from importlib import metadata

    blob = json.dumps({"spec": spec, "torch": metadata.version("torch"),
                       "iree-base-compiler": metadata.version("iree-base-compiler")},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def export(*, spec: dict, timeout: float, mlir: str, inputs: str, reference: str, meta: str,
           log: str) -> StageResult:
    """The workload's export, made once and shared by every SKU's case job: under a lock,
    an export whose key matches (its files all there) is reused, a failed one included,
    so a model that cannot be exported is tried once, not once per SKU."""
    from filelock import FileLock

    key = export_key(spec)
    artifacts = [mlir, inputs, reference]
    Path(meta).parent.mkdir(parents=True, exist_ok=True)
    with FileLock(meta + ".lock"):
        try:
            prior = StageResult.read(meta)
        except (OSError, ValueError, KeyError, TypeError):
            prior = None  # none yet, or unreadable: export again
        if (prior is not None and prior.data.get("key") == key
                and all(map(os.path.exists, artifacts))):
            with open(log, "a") as fh:
                fh.write(f"export {key} reused from {meta} ({prior.status})\n")
            return prior

        def body():
            with tempfile.TemporaryDirectory() as tmp:
                side = Path(tmp) / "export.json"
                run_python("workflow.backends.iree.export",
                           [json.dumps(spec), mlir, inputs, reference, str(side)],
                           stage="export", timeout=timeout, log=log)
                return {**read_json(side), "spec": spec, "dtype": spec["dtype"], "key": key}

        result = run_stage("export", meta, artifacts, [], body)
        if not result.ok:
            # A failed export is shared like a good one; its key says what failed.
            result.data["key"] = key
            result.write(meta)
        return result


def compile_module(*, mlir: str, export_meta: str | None = None, sku: dict, timeout: float,
                   vmfb: str, meta: str, log: str, flags: list[str] | None = None) -> StageResult:
    """iree-compile with the SKU's flags, or with `flags` (benchmark files bring their own);
    `export_meta` is the upstream stage when there is one."""
    def body():
        nonlocal flags
        flags = flags if flags is not None else iree.compile_flags(sku)
        with tempfile.TemporaryDirectory() as tmp:
            stats_file = Path(tmp) / "statistics.json"
            argv = iree.compile_argv(sku_tool(sku, "compile_tool"), mlir, vmfb, flags,
                                     str(stats_file))
            t0 = time.monotonic()
            run_tool(argv, stage="compile", timeout=timeout, log=log)
            seconds = time.monotonic() - t0
            counts = iree.parse_compile_statistics(stats_file.read_text())
        return {"seconds": seconds, "binary_bytes": os.path.getsize(vmfb), "flags": flags,
                "compiler_version": sku_compiler_version(sku, log), **counts}

    return run_stage("compile", meta, [vmfb], [export_meta] if export_meta else [], body)


TOOLS = {"compile_tool": "iree-compile", "benchmark_tool": "iree-benchmark-module"}


def sku_tool(sku: dict, which: str) -> str:
    """The SKU's own build of an IREE tool (iree.compile_tool / iree.benchmark_tool),
    else the one installed beside benchflow: two builds of IREE become two SKUs."""
    return sku["iree"].get(which) or tool_path(TOOLS[which])


def sku_compiler_version(sku: dict, log: str) -> str:
    """The version of the compiler a SKU uses: the installed package's, or what the
    SKU's own build says of itself (`--version`)."""
    if not sku["iree"].get("compile_tool"):
        return iree.compiler_version()
    out = run_tool([sku["iree"]["compile_tool"], "--version"], stage="compile", timeout=60,
                   log=log).stdout
    return " ".join(out.split())[:200] or "unknown"


def _benchmark(argv: list[str], timeout: float, log: str) -> iree.BenchmarkRun:
    proc = run_tool(argv, stage="run", timeout=timeout, log=log)
    try:
        return iree.parse_benchmark_json(proc.stdout)
    except (ValueError, KeyError) as exc:
        raise StageError("run", f"unreadable iree-benchmark-module output: {exc}") from None


def run_iree(*, vmfb: str, compile_meta: str, export_meta: str, inputs: str, sku: dict,
             timeout: float, timing: str, log: str, gate: dict | None = None) -> StageResult:
    """Times a module with iree-benchmark-module, one fresh process per invocation."""
    m = sku["measurement"]

    def body():
        dtypes = [i["dtype"] for i in read_json(export_meta)["inputs"]]
        tool = sku_tool(sku, "benchmark_tool")
        with tempfile.TemporaryDirectory() as tmp:
            args = iree.write_input_files(inputs, dtypes, Path(tmp))
            return measure(lambda **kw: iree.benchmark_argv(tool, vmfb, "main", args, sku, **kw),
                           m, timeout, log, gate)

    return run_stage("run", timing, [], [compile_meta], body)


def measure(argv_for: Callable[..., list[str]], m: dict, timeout: float, log: str,
            gate: dict | None = None) -> dict:
    """The measurement protocol of one module (DESIGN.md): a first call of a fresh process,
    then fresh-process invocations: m["invocations"] of them (twice as many when noisy),
    or, when m["max_invocations"] is larger, as many as the sequential plan of
    invocations() asks for. `argv_for(repetitions=, warmup_s=, min_time=)` builds the
    iree-benchmark-module command. With the suite's `goldens` settings (`gate`), the
    timing also holds the minimum detectable effect of the golden gate (mde_ratio)."""
    # The first call of a fresh process, without warm-up: one iteration.
    first = _benchmark(argv_for(repetitions=1, warmup_s=0, min_time="1x"), timeout, log)
    argv = argv_for(repetitions=m["repetitions"], warmup_s=m["min_warmup_time_s"],
                    min_time=f"{m['min_time_s']:g}s")
    runs, sampling = invocations(lambda: _benchmark(argv, timeout, log), m,
                                 lambda r: r.median_ms)
    medians = [r.median_ms for r in runs]
    # Peak RSS over this job's children, which are only the benchmark processes.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    timing_stats = {**stats.summarize(medians, m["noisy_cv"]), **sampling}
    timing_stats["mde_ratio"] = gate_mde(timing_stats["cv"], len(medians), gate)
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
            # The SLURM job that measured (None outside SLURM): the case record is
            # written later, by a local rule, where no job id exists.
            "slurm_job_id": os.environ.get("SLURM_JOB_ID")}


def gate_mde(cv: float, n: int, gate: dict | None) -> float | None:
    """The smallest slowdown the golden gate would flag with 80 % power against a golden
    of as many invocations with this CV; None without gate settings or when no ratio
    can be flagged (too few invocations for the test to reach its p threshold)."""
    import math

    from workflow.stats.paired import mde_two_sample

    if gate is None:
        return None
    mde = mde_two_sample(cv, n, n, alpha=gate["p_value"], power=0.8,
                         tolerance=gate["tolerance"])
    return mde if math.isfinite(mde) else None


def invocations(invoke: Callable[[], object], m: dict, figure: Callable[[object], float]
                ) -> tuple[list, dict]:
    """Fresh-process invocations of one case and how their number was decided.

    Fixed (max_invocations <= invocations): m["invocations"], and as many again when
    their CV exceeds noisy_cv and rerun_noisy is set (DESIGN.md: noisy data alone may
    not decide). Adaptive: a group-sequential plan (stats/sequential.py) from
    `invocations` up to `max_invocations` rounds stops once the median's interval is
    narrower than target_rel_width, or at the last look, or at the first look after
    budget_s; the recorded interval is the plan's, which holds at its level however
    the stop came about (a plain interval after a data-dependent stop would not)."""
    from workflow.stats import sequential
    from workflow.suite.load import sequential_plan

    if m["max_invocations"] <= m["invocations"]:
        runs = [invoke() for _ in range(m["invocations"])]
        reruns = 0
        if m["rerun_noisy"] and stats.cv([figure(r) for r in runs]) > m["noisy_cv"]:
            runs += [invoke() for _ in range(m["invocations"])]
            reruns = 1
        return runs, {"noisy_reruns": reruns, "stop_reason": "fixed"}
    plan = sequential_plan(m)
    runs = []
    t0 = time.monotonic()
    while True:
        runs.append(invoke())
        xs = [figure(r) for r in runs]
        decision = sequential.decide(xs, plan)
        if (not decision.stop and len(xs) >= plan.first_look
                and time.monotonic() - t0 >= m["budget_s"]):
            decision = sequential.decide(xs, plan, final_reason="time-budget")
        if decision.stop:
            break
    interval = [decision.lo, decision.hi] if decision.lo is not None else None
    return runs, {"noisy_reruns": 0, "stop_reason": decision.reason,
                  "ci95_ms": interval if (decision.level or 0) >= 0.95 else None,
                  "ci_level": decision.level if interval else None,
                  "sequential": {"looks": list(plan.looks), "alpha": plan.alpha,
                                 "target_rel_width": plan.target_rel_width,
                                 "budget_s": m["budget_s"], "method": sequential.METHOD}}


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


def job_key(case: dict, sku: dict, tolerances: dict, device_here: bool) -> str:
    """What decides an IREE case's results: its plan (export spec, identity), the SKU's
    settings but its description, the accuracy tolerances, the installed torch,
    compiler and runtime versions, and whether the SKU's device is on this machine."""
    from importlib import metadata

    settings = {k: v for k, v in sku.items() if k != "description"}
    versions = {p: metadata.version(p)
                for p in ("torch", "iree-base-compiler", "iree-base-runtime")}
    blob = json.dumps([case, settings, tolerances, versions, device_here], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _reusable(case_path: str, key: str) -> bool:
    """Whether a case record on disk was made with this key; an unreadable one (absent,
    cut short, edited by hand) is measured again, not trusted and not a crash."""
    try:
        record = read_json(case_path)
        return record.get("provenance", {}).get("job_key") == key
    except (OSError, ValueError, AttributeError):
        return False


def batch_job(*, cases: list[dict], sku: dict, tolerances: dict, timeouts: dict, gate: dict,
              batch: str, log: str) -> dict:
    """Measures a batch of one SKU's IREE cases, one after the other (case_job), and
    lists them in `batch`.

    Snakemake reruns a batch when any member changed; then only the members whose key
    (job_key) changed are measured again, the others' records are kept: adding a
    workload measures that workload only. When no member's key changed (the rerun was
    forced, the adapter changed, or the batch list was deleted), every member is
    measured again: that is what forcing means. The members' keys of the last finished
    run are kept beside the batch list, where Snakemake does not delete them."""
    from workflow.paths import CASE, IREE_CASE_LOG

    # Whether this machine has the SKU's device: a compile-only result is not reused
    # where the device exists.
    device_here = iree.device_absent_reason(sku["iree"]["device"]) is None
    keys = [job_key(c, sku, tolerances, device_here) for c in cases]
    members = Path(batch).with_suffix(".members.json")
    forced = members.exists() and read_json(members) == keys
    listed = []
    with open(log, "a") as fh:
        for case, key in zip(cases, keys, strict=True):
            ident = case["identity"]
            path = CASE.format(sku=ident["sku"], backend="iree", workload=ident["workload"],
                               recipe=ident["recipe"])
            reused = not forced and _reusable(path, key)
            fh.write(f"{ident['id']}: {'reused' if reused else 'measuring'} ({key})\n")
            fh.flush()
            if not reused:
                case_job(spec=case["spec"], identity=ident, sku=sku, tolerances=tolerances,
                         timeouts=timeouts, gate=gate, key=key, case=path,
                         log=IREE_CASE_LOG.format(sku=ident["sku"],
                                                  workload=ident["workload"]))
            listed.append({"id": ident["id"], "case": path, "key": key, "reused": reused})
    write_json(members, keys)
    write_json(batch, {"cases": listed})
    return {"cases": listed}


def case_job(*, spec: dict, identity: dict, sku: dict, tolerances: dict, timeouts: dict,
             gate: dict, key: str, case: str, log: str) -> dict:
    """One IREE case, start to finish: export (shared), compile, run, verify, then the
    case record. Each stage writes its own JSON, so a failed case names its stage and a
    user can read every step."""
    from workflow.paths import (
        COMPILE_META,
        COMPILE_VMFB,
        EXPORT_INPUTS,
        EXPORT_META,
        EXPORT_MLIR,
        EXPORT_REFERENCE,
        IREE_BASELINE_RUN_TIMING,
        IREE_BASELINE_VERIFY_ACCURACY,
    )
    from workflow.regression.goldens import golden_path

    mlir, inputs, reference, export_meta = (
        p.format(workload=identity["workload"])
        for p in (EXPORT_MLIR, EXPORT_INPUTS, EXPORT_REFERENCE, EXPORT_META))
    vmfb, compile_meta, timing, accuracy = (
        p.format(sku=identity["sku"], workload=identity["workload"])
        for p in (COMPILE_VMFB, COMPILE_META, IREE_BASELINE_RUN_TIMING,
                  IREE_BASELINE_VERIFY_ACCURACY))
    # A case measured again starts from nothing: should this job fail (a bug of ours),
    # no earlier result of the case is left to pass for the new one.
    for path in (compile_meta, timing, accuracy, case):
        Path(path).unlink(missing_ok=True)
    for path in (log, vmfb, timing, accuracy, case):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    export(spec=spec, timeout=timeouts["export_s"], mlir=mlir, inputs=inputs,
           reference=reference, meta=export_meta, log=log)
    compile_module(mlir=mlir, export_meta=export_meta, sku=sku, timeout=timeouts["compile_s"],
                   vmfb=vmfb, meta=compile_meta, log=log)
    # Decided here, on the machine that would measure: without the SKU's device (a GPU
    # target on a CPU-only machine) the case is compiled only (status compile-only).
    absent = iree.device_absent_reason(sku["iree"]["device"])
    if not (absent and not_run("run", timing, [compile_meta], absent)):
        run_iree(vmfb=vmfb, compile_meta=compile_meta, export_meta=export_meta,
                 inputs=inputs, sku=sku, timeout=timeouts["run_s"], timing=timing, log=log,
                 gate=gate)
    if not (absent and not_run("verify", accuracy, [compile_meta], absent)):
        verify_iree(vmfb=vmfb, compile_meta=compile_meta, export_meta=export_meta,
                    inputs=inputs, reference=reference, sku=sku, tolerances=tolerances,
                    timeout=timeouts["verify_s"], accuracy=accuracy, log=log)
    # Judged against the goldens as they are now (not a job input: blessing must not
    # re-measure); the report step judges every IREE case again with the goldens then.
    goldens = golden_path(gate["dir"], identity["sku"])
    return write_case(case=case, identity=identity, sku=sku,
                      stages=[export_meta, compile_meta, timing, accuracy],
                      goldens=str(goldens) if goldens.exists() else None, gate=gate,
                      provenance={"job_key": key})
