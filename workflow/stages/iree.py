"""The IREE stages of the DAG: export, compile, run, verify and the case record, each
called by a thin script with Snakemake's paths. Failures follow stages/model.py: a
tool's failure is a recorded result, a bug in benchflow fails the job.
"""

from __future__ import annotations

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
from workflow.records.storage import read_json
from workflow.stages.model import run_stage
from workflow.stats import summary as stats
from workflow.stats.accuracy import compare


def export(*, spec: dict, timeout: float, mlir: str, inputs: str, reference: str, meta: str,
           log: str) -> StageResult:
    def body():
        with tempfile.TemporaryDirectory() as tmp:
            side = Path(tmp) / "export.json"
            run_python("workflow.backends.iree.export",
                       [json.dumps(spec), mlir, inputs, reference, str(side)],
                       stage="export", timeout=timeout, log=log)
            return {**read_json(side), "spec": spec, "dtype": spec["dtype"]}

    return run_stage("export", meta, [mlir, inputs, reference], [], body)


def compile_module(*, mlir: str, export_meta: str | None = None, sku: dict, timeout: float,
                   vmfb: str, meta: str, log: str, flags: list[str] | None = None) -> StageResult:
    """iree-compile with the SKU's flags, or with `flags` (benchmark files bring their own);
    `export_meta` is the upstream stage when there is one."""
    def body():
        nonlocal flags
        flags = flags if flags is not None else iree.compile_flags(sku)
        with tempfile.TemporaryDirectory() as tmp:
            stats_file = Path(tmp) / "statistics.json"
            argv = iree.compile_argv(tool_path("iree-compile"), mlir, vmfb, flags, str(stats_file))
            t0 = time.monotonic()
            run_tool(argv, stage="compile", timeout=timeout, log=log)
            seconds = time.monotonic() - t0
            counts = iree.parse_compile_statistics(stats_file.read_text())
        return {"seconds": seconds, "binary_bytes": os.path.getsize(vmfb), "flags": flags,
                "compiler_version": iree.compiler_version(), **counts}

    return run_stage("compile", meta, [vmfb], [export_meta] if export_meta else [], body)


def _benchmark(argv: list[str], timeout: float, log: str) -> iree.BenchmarkRun:
    proc = run_tool(argv, stage="run", timeout=timeout, log=log)
    try:
        return iree.parse_benchmark_json(proc.stdout)
    except (ValueError, KeyError) as exc:
        raise StageError("run", f"unreadable iree-benchmark-module output: {exc}") from None


def run_iree(*, vmfb: str, compile_meta: str, export_meta: str, inputs: str, sku: dict,
             timeout: float, timing: str, log: str) -> StageResult:
    """Times a module with iree-benchmark-module, one fresh process per invocation."""
    m = sku["measurement"]

    def body():
        dtypes = [i["dtype"] for i in read_json(export_meta)["inputs"]]
        tool = tool_path("iree-benchmark-module")
        with tempfile.TemporaryDirectory() as tmp:
            args = iree.write_input_files(inputs, dtypes, Path(tmp))
            return measure(lambda **kw: iree.benchmark_argv(tool, vmfb, "main", args, sku, **kw),
                           m, timeout, log)

    return run_stage("run", timing, [], [compile_meta], body)


def measure(argv_for: Callable[..., list[str]], m: dict, timeout: float, log: str) -> dict:
    """The measurement protocol of one module (DESIGN.md): a first call of a fresh process,
    then m["invocations"] fresh processes, twice as many when noisy. `argv_for(repetitions=,
    warmup_s=, min_time=)` builds the iree-benchmark-module command."""
    # The first call of a fresh process, without warm-up: one iteration.
    first = _benchmark(argv_for(repetitions=1, warmup_s=0, min_time="1x"), timeout, log)
    argv = argv_for(repetitions=m["repetitions"], warmup_s=m["min_warmup_time_s"],
                    min_time=f"{m['min_time_s']:g}s")
    runs = [_benchmark(argv, timeout, log) for _ in range(m["invocations"])]
    medians = [r.median_ms for r in runs]
    reruns = 0
    if m["rerun_noisy"] and stats.cv(medians) > m["noisy_cv"]:
        # DESIGN.md: noisy data alone may not decide; measure again with twice
        # the invocations in all, then record whatever that gives.
        runs += [_benchmark(argv, timeout, log) for _ in range(m["invocations"])]
        medians = [r.median_ms for r in runs]
        reruns = 1
    # Peak RSS over this job's children, which are only the benchmark processes.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    timing_stats = stats.summarize(medians, m["noisy_cv"])
    timing_stats.update(
        repetitions=m["repetitions"], first_run_ms=first.median_ms, noisy_reruns=reruns,
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
