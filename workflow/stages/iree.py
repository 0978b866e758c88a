"""The stages of the DAG. Each is called by a thin script with Snakemake's paths.

Failures are data: every stage always writes its stage JSON (`status` ok or failed,
`stage`, `error`) and, on failure, empty artifacts, so the job succeeds, the suite
goes on, and the case record says where and why the case failed. A stage whose
upstream failed records that failure unchanged instead of running.
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from workflow.backends.iree import tools as iree
from workflow.backends.proc import first_lines, run_python, run_tool, tool_path
from workflow.errors import StageError
from workflow.models.registry import tolerance_for
from workflow.records.storage import read_json, touch_empty, write_json
from workflow.stats import summary as stats
from workflow.stats.accuracy import compare


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_stage(
    stage: str, meta_path: str, artifacts: list[str], upstream: list[str],
    body: Callable[[], dict], log: str | None = None,
) -> dict:
    """Runs `body` unless an upstream stage failed; always writes meta_path."""
    started = now_iso()
    record: dict = {"stage": stage, "status": "ok", "error": None, "failed_stage": None}
    for path in upstream:
        up = read_json(path)
        if up["status"] != "ok":
            record.update(status="failed", failed_stage=up["failed_stage"], error=up["error"])
            break
    if record["status"] == "ok":
        try:
            record.update(body())
        except StageError as exc:
            record.update(status="failed", failed_stage=stage, error=exc.message)
        except Exception as exc:  # a bug or an unexpected tool output: still a recorded result
            tb = traceback.format_exc()
            if log:
                with open(log, "a") as fh:
                    fh.write(tb)
            record.update(status="failed", failed_stage=stage,
                          error=first_lines(f"{type(exc).__name__}: {exc}"))
    if record["status"] != "ok":
        for art in artifacts:
            touch_empty(art)
    record.update(started_at=started, finished_at=now_iso())
    write_json(meta_path, record)
    return record


def export(*, spec: dict, timeout: float, mlir: str, inputs: str, reference: str, meta: str,
           log: str) -> dict:
    def body():
        with tempfile.TemporaryDirectory() as tmp:
            side = Path(tmp) / "export.json"
            run_python("workflow.backends.iree.export",
                       [json.dumps(spec), mlir, inputs, reference, str(side)],
                       stage="export", timeout=timeout, log=log)
            return {**read_json(side), "spec": spec, "dtype": spec["dtype"]}

    return run_stage("export", meta, [mlir, inputs, reference], [], body, log)


def compile_module(*, mlir: str, export_meta: str | None = None, sku: dict, timeout: float,
                   vmfb: str, meta: str, log: str, flags: list[str] | None = None) -> dict:
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

    return run_stage("compile", meta, [vmfb], [export_meta] if export_meta else [], body, log)


def _benchmark(argv: list[str], timeout: float, log: str) -> iree.BenchmarkRun:
    proc = run_tool(argv, stage="run", timeout=timeout, log=log)
    try:
        return iree.parse_benchmark_json(proc.stdout)
    except (ValueError, KeyError) as exc:
        raise StageError("run", f"unreadable iree-benchmark-module output: {exc}") from None


def run_iree(*, vmfb: str, compile_meta: str, export_meta: str, inputs: str, sku: dict,
             timeout: float, timing: str, log: str) -> dict:
    """Times a module with iree-benchmark-module, one fresh process per invocation."""
    m = sku["measurement"]

    def body():
        dtypes = [i["dtype"] for i in read_json(export_meta)["inputs"]]
        tool = tool_path("iree-benchmark-module")
        with tempfile.TemporaryDirectory() as tmp:
            args = iree.write_input_files(inputs, dtypes, Path(tmp))
            return measure(lambda **kw: iree.benchmark_argv(tool, vmfb, "main", args, sku, **kw),
                           m, timeout, log)

    return run_stage("run", timing, [], [compile_meta], body, log)


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
        # Each invocation's mean, as sharktank's single-run check reads it (for comparison).
        invocation_means_ms=[r.aggregates_ms.get("mean", r.median_ms) for r in runs],
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
                log: str) -> dict:
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

    return run_stage("verify", accuracy, [], [compile_meta], body, log)


def case_iree(*, identity: dict, sku: dict, export: str, compiled: str, run: str, verify: str,
              case: str, goldens: str | list | None = None, gate: dict | None = None) -> dict:
    from workflow.records.case import Golden, build_iree_case
    from workflow.regression.gate import golden_section

    rec = build_iree_case(identity, sku, read_json(export), read_json(compiled), read_json(run),
                          read_json(verify))
    # The verdict against the SKU's golden file (an input only when it exists).
    rec.golden = Golden(**golden_section(rec.to_dict(), goldens or None, gate))
    data = rec.to_dict()
    write_json(case, data)
    return data
