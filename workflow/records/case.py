"""The case record (DESIGN.md): typed, versioned, built from the stage JSONs.

Field names are a contract read by tests, the CLI and users' scripts: add, never rename.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass, field
from typing import Any

from workflow.records.stage import NO_DEVICE, UNSUPPORTED, StageResult

SCHEMA_VERSION = "1.1"  # 1.1: compile-only cases, ci_level, stop_reason, mde_ratio
# compile-only: compiled (dispatches, size, compile seconds, and their goldens judged), not
# run: the runtime device is absent here (its run and verify stages say no-device).
COMPILE_ONLY = "compile-only"
STATUSES = ("ok", "failed", "unsupported", "skipped", COMPILE_ONLY)
STAGE_ORDER = ("export", "compile", "run", "verify")


@dataclass
class Compile:
    """IREE: iree-compile of the module. torch-inductor: the first (compiling) call;
    dispatch_count and binary_bytes are IREE's and null there."""

    seconds: float
    dispatch_count: int | None
    binary_bytes: int | None
    flags: list[str]
    executable_count: int | None = None
    compiler_version: str | None = None


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    p90_ms: float
    cv: float
    # The median's order-statistic interval when it reaches 95 % (null: too few
    # invocations), and its exact coverage; under adaptive invocations the sequential
    # plan's interval, which holds at ci_level however the stop came about.
    ci95_ms: list[float] | None
    invocations: int
    # IREE: --benchmark_repetitions of each invocation (its median is over these).
    # Torch: null; torch.utils.benchmark's blocks are not recorded, and the timed
    # calls of an invocation are calls_per_invocation.
    repetitions: int | None
    invocation_medians_ms: list[float]
    first_run_ms: float | None
    noisy: bool
    noisy_reruns: int = 0
    # Training: forward, backward and optimizer step each measured on its own (ms).
    phases_ms: dict[str, float] | None = None
    # Torch: timed calls per invocation, the median over invocations (inference: every
    # call of blocked_autorange's blocks; training: timed steps). IREE: null (its
    # iteration counts are not recorded).
    calls_per_invocation: int | None = None
    ci_level: float | None = None
    # Why measuring stopped: fixed (a fixed count) | width-reached | max-rounds |
    # time-budget (adaptive invocations, stats/sequential.py).
    stop_reason: str | None = None
    # The smallest slowdown the golden gate would flag with 80 % power at this noise,
    # against a golden of as many invocations; null: none it could flag.
    mde_ratio: float | None = None
    # Adaptive invocations: the plan's looks, alpha, target width, budget and method.
    sequential: dict | None = None


@dataclass
class Speedup:
    """Ratios of medians, > 1 means this case is faster."""

    vs_baseline: float | None = None  # the baseline recipe, same backend, workload and SKU
    vs_eager: float | None = None     # torch-eager, same recipe, workload and SKU


@dataclass
class Profile:
    """Artifacts written for a case: paths relative to the working directory."""

    trace: str | None = None            # Chrome trace (torch.profiler)
    memory_snapshot: str | None = None  # CUDA memory snapshot
    memory_snapshot_status: str | None = None  # why there is none (e.g. unsupported on CPU)
    memory_visualization: str | None = None  # HTML view of the memory snapshot (torchao's
    #                                          enable_memory_visualizer)
    memory_visualization_status: str | None = None  # why there is none


@dataclass
class Throughput:
    items_per_s: float | None = None
    gflops: float | None = None
    percent_of_peak: float | None = None


@dataclass
class Memory:
    peak_bytes: int | None
    kind: str


@dataclass
class Accuracy:
    pcc: float | None
    max_abs_err: float
    max_rel_err: float
    allclose: bool
    sqnr_db: float | None
    reference: str
    accurate: bool | None = None
    rtol: float | None = None
    atol: float | None = None
    min_pcc: float | None = None


@dataclass
class Graph:
    aten_ops: int
    aten_ops_unique: int
    op_histogram: dict[str, int]
    graph_breaks: int | None = None
    graph_count: int | None = None  # torch.compile: graphs Dynamo produced


@dataclass
class Golden:
    verdict: str = "no-golden"
    value_ms: float | None = None
    tolerance: float | None = None
    ratio: float | None = None
    p_value: float | None = None
    dispatch_verdict: str = "no-golden"
    size_verdict: str = "no-golden"
    # Added by the regression gate (workflow/verdict.py): where the golden came from,
    # which test gave p_value, why the verdict, and the ratios of dispatches and size.
    source: str | None = None
    test: str | None = None
    reason: str | None = None
    dispatch_golden: int | None = None
    dispatch_ratio: float | None = None
    size_golden_bytes: int | None = None
    size_ratio: float | None = None
    size_tolerance: float | None = None
    # Which rule judged each aspect, and whose it is: "sharktank: ..." where a benchmark
    # file's own golden_* rule applies as its runner applies it, "benchflow: ..." where
    # benchflow's rule does (stats/verdict.py).
    time_rule: str | None = None
    dispatch_rule: str | None = None
    size_rule: str | None = None


@dataclass
class CaseRecord:
    id: str
    model: str
    config: str
    dtype: str
    shape: list[int]
    sku: str
    backend: str
    recipe: str
    mode: str
    status: str
    stage: str | None
    error: str | None
    workload: str
    layers: int | None = None
    device: str = "cpu"
    compile_mode: str | None = None  # torch.compile mode of torch-inductor cases
    group: str | None = None         # the torchao model_params entry a case came from
    compile: Compile | None = None
    timing: Timing | None = None
    throughput: Throughput | None = None
    memory: Memory | None = None
    accuracy: Accuracy | None = None
    graph: Graph | None = None
    speedup: Speedup = field(default_factory=Speedup)
    profile: Profile | None = None
    golden: Golden = field(default_factory=Golden)
    provenance: dict[str, Any] = field(default_factory=dict)
    # Sections a stage did not measure and why, e.g. a compile-only case's
    # {"timing": {"status": "unsupported", "reason": "no cuda device here: ..."}, ...};
    # null when every stage that ran measured its sections.
    not_measured: dict[str, dict[str, str]] | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _pick(cls, data: dict | None):
    """Builds a record section from a stage's dict, ignoring the stage's extra keys."""
    if data is None:
        return None
    names = cls.__dataclass_fields__
    return cls(**{k: v for k, v in data.items() if k in names})


def case_provenance(run: dict | None, sku: dict) -> dict:
    """What can differ from case to case: host, threads, load, the SLURM job."""
    prov: dict[str, Any] = {"host": socket.gethostname(),
                            "torch_threads": sku["torch"]["threads"],
                            "iree_device": sku["iree"]["device"],
                            "task_topology_max_group_count":
                                sku["iree"]["task_topology_max_group_count"]}
    job = (run or {}).get("slurm_job_id") or os.environ.get("SLURM_JOB_ID")
    if job:
        prov["slurm_job_id"] = job
    if run and run.get("contexts"):
        prov["load_avg"] = [c.get("load_avg") for c in run["contexts"]]
        prov["cpu_scaling_enabled"] = run["contexts"][0].get("cpu_scaling_enabled")
        # The machine that measured, which on a cluster is not the one writing this.
        prov["host"] = run["contexts"][0].get("host_name") or prov["host"]
    if run and run.get("runtime_version"):
        prov["iree_runtime_version"] = run["runtime_version"]
    return prov


# Which sections of a case record each stage's data fills. IREE's compile stage data is
# the Compile section itself; every other stage carries its sections by name.
SECTIONS = {"graph": Graph, "compile": Compile, "timing": Timing, "memory": Memory,
            "accuracy": Accuracy, "profile": Profile}


# The sections a stage measures, which a stage not run (no-device) leaves unmeasured.
STAGE_SECTIONS = {"run": ("timing", "memory"), "verify": ("accuracy",)}


def _status(results: list[StageResult]) -> tuple[str, str | None, str | None]:
    """(status, stage, error) of a case from its stage results in DAG order. The first
    result that is neither ok nor no-device decides; else stages not run for want of a
    device after an ok compile make it compile-only (error: the first one's reason), and
    without an ok compile unsupported (the device is absent and nothing was compiled)."""
    first_bad = next((r for r in results if not r.ok and r.status != NO_DEVICE), None)
    if first_bad is not None:
        return first_bad.status, first_bad.failed_stage, first_bad.error
    absent = next((r for r in results if r.status == NO_DEVICE), None)
    if absent is None:
        return "ok", None, None
    if any(r.stage == "compile" and r.ok for r in results):
        return COMPILE_ONLY, None, absent.error
    return UNSUPPORTED, None, absent.error


def assemble(identity: dict, results: list[StageResult], provenance: dict) -> CaseRecord:
    """The one case assembler (IREE, torch and sharktank-file cases): an identity plus
    stage results in DAG order. The first result that is not ok decides the status
    (stages not run for want of a device: compile-only, see _status); every section an ok
    stage measured is kept, so a case failed at verify still shows its timing, and the
    sections of stages not run say so with the reason (`not_measured`)."""
    status, stage, error = _status(results)
    rec = CaseRecord(**_identity(identity), status=status, stage=stage, error=error,
                     provenance=provenance)
    for r in results:
        if r.status == NO_DEVICE:
            rec.not_measured = rec.not_measured or {}
            for name in STAGE_SECTIONS.get(r.stage, ()):
                rec.not_measured.setdefault(name, {"status": UNSUPPORTED,
                                                   "reason": r.error or "no device"})
    flops = None
    for r in results:
        if not r.ok:
            continue
        if r.stage == "compile":
            rec.compile = _pick(Compile, r.data)
        for name, cls in SECTIONS.items():
            if r.data.get(name) is not None:
                setattr(rec, name, _pick(cls, r.data[name]))
        flops = r.data.get("flops", flops)
    if rec.timing is not None:
        rec.throughput = _throughput(rec.timing.median_ms, flops)
    return rec


IDENTITY = ("id", "model", "config", "dtype", "shape", "sku", "backend", "recipe", "mode",
            "workload", "layers", "device", "compile_mode", "group")


def _identity(identity: dict) -> dict:
    """The identity fields a case has; optional ones (layers, device, ...) keep the
    record's defaults when a kind of case does not have them (benchmark files)."""
    return {k: identity[k] for k in IDENTITY if k in identity}


def _throughput(median_ms: float, flops: float | None) -> Throughput:
    median_s = median_ms / 1e3
    return Throughput(items_per_s=1.0 / median_s if median_s else None,
                      gflops=flops / median_s / 1e9 if flops and median_s else None)


# Keys of the torch worker's characterize result that go to a CUDA case's provenance.
TORCH_GPU_KEYS = ("gpu_name", "gpu_count", "gpu_memory_bytes")


def torch_provenance(sku: dict, char: dict) -> dict:
    """What can differ between torch cases: host, threads, the SLURM job, the GPU a CUDA
    case ran on (the worker's torch.cuda)."""
    return {"host": socket.gethostname(), "torch_threads": sku["torch"]["threads"],
            **({"slurm_job_id": os.environ["SLURM_JOB_ID"]}
               if os.environ.get("SLURM_JOB_ID") else {}),
            **{k: char[k] for k in TORCH_GPU_KEYS if char.get(k) is not None}}


def unsupported_case(identity: dict, reason: str) -> CaseRecord:
    """A case that cannot run (known while planning): recorded with its reason."""
    return CaseRecord(**_identity(identity), status="unsupported", stage=None, error=reason)


def skipped_case(identity: dict, reason: str, provenance: dict | None = None) -> CaseRecord:
    """A case that cannot run here (a benchmark file whose device, chip or files this
    machine lacks): recorded with its reason, as sharktank's runner skips it."""
    return CaseRecord(**_identity(identity), status="skipped", stage=None, error=reason,
                      provenance=dict(provenance or {}))
