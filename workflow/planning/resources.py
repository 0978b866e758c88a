"""Threads, memory and wall time of each job, derived from its case (pure functions).

The rules call these from `resources:` lambdas, so a scheduler (SLURM through
Snakemake's executor plugin, or a local `--resources mem_mb=...` limit) knows what
a job needs. Memory grows with the model's weights:

- export builds the model in fp32 from its registry entry, so its weights are
  estimated before anything exists, from model, config, shape and layers
  (`param_estimate`);
- compile, run and verify read a file that holds exactly the weights (the MLIR
  bytecode has them inlined, the .vmfb carries them), so their memory comes from
  that file's size: exact for any model, built-in or from a suite's model_modules.

Calibration (peak RSS on the 2-core x86 CI machine, torch 2.13, IREE 3.13; weight
MiB = size of module.mlirbc): linear 16x32x32 (0 MiB), bert tiny (17), transformer_block
base x4 (144), mlp 8x2048x8192 (256), mlp 8x4096x8192 (512) gave, for the stage's
tool process: export 404..1571, compile 142..1166, run 30..1032, verify 35..548 MiB;
the per-stage lines in STAGE_MEMORY follow them. A job also runs a nested snakemake and the stage
adapter's interpreter: a whole verify job of the linear peaked at 202 MiB of which
the tool was 35. HEADROOM covers activations of larger shapes and allocator
variance; every retry of a job asks for `attempt` times as much, so a job killed for
memory comes back with more.

Wall time of an IREE batch or benchmark-file run is what its cases are expected to
take (`iree_case_seconds`: export and compile from the weights, the measuring from the
SKU's protocol, earlier records of the same cases where they exist), with a margin,
each case capped by its stages' timeouts; a job that SLURM stops at that limit comes
back (attempt 2) with the worst case, every stage at its timeout, so that a stage that
hits its timeout is still recorded as a failed case. Other jobs ask for their stages'
timeouts plus the job overhead.

Where the jobs go on SLURM is planning/placement.py's.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

from workflow.errors import ConfigError

# The built-in models' size tables; these modules import torch only when a model is built.
from workflow.models.bert import BERT_CONFIGS, VOCAB
from workflow.models.layers import ACTIVATIONS, BLOCK_CONFIGS
from workflow.paths import CASE, EXPORT_MLIR
from workflow.records.storage import read_json

# MiB of the nested snakemake inside each cluster job plus the stage adapter's
# interpreter (measured: 202 MiB job peak - 35 MiB tool, rounded up).
JOB_BASE_MB = 170
# Per stage: (MiB of the tool process with no weights, MiB per MiB of weights).
# export: torch + transformers imports (bert tiny 554 MiB at 17 MiB of weights);
#   the fp32 module, the exported program and the MLIR bytecode: 2.25 x the weights.
# compile: iree-compile holds the parsed module and its lowered copy: 2.0 x.
# run: iree-benchmark-module maps the .vmfb and uploads the weights: 2.0 x.
# verify: iree.runtime in a python process, weights once: 1.0 x.
STAGE_MEMORY = {
    "export": (520, 2.25),
    "compile": (150, 2.0),
    "run": (40, 2.0),
    "verify": (35, 1.0),
}
HEADROOM = 1.5
MEM_GRANULE_MB = 256  # requests are rounded up to this, as schedulers allocate anyway
# The case and report rules run inside the main snakemake (localrule): python with
# jsonschema and the stage JSONs (measured 35 MiB), rounded up to one granule.
LOCAL_MEM_MB = 256
# Local rules never reach a scheduler; they merge a few JSON files in about a second.
LOCAL_RUNTIME_MIN = 5

# Seconds a job needs beyond its stage's tool: the nested snakemake starts in 1.4 to
# 2.4 s here and about 5 s on a busy cluster file system, the adapter imports numpy,
# and outputs must reach the shared file system.
JOB_OVERHEAD_S = 60

BYTES_PER_ELEMENT = {"f32": 4, "f16": 2, "bf16": 2}
MIB = 1 << 20


def mem_request_mb(stage: str, weight_bytes: float, attempt: int = 1) -> int:
    """MiB to ask for a job of `stage` whose module holds `weight_bytes` of weights."""
    if stage not in STAGE_MEMORY:
        raise ValueError(f"unknown stage {stage!r}; expected one of {sorted(STAGE_MEMORY)}")
    if weight_bytes < 0 or attempt < 1:
        raise ValueError("weight_bytes must be >= 0 and attempt >= 1")
    base, per_weight = STAGE_MEMORY[stage]
    need = (JOB_BASE_MB + base + per_weight * weight_bytes / MIB) * HEADROOM * attempt
    return int(math.ceil(need / MEM_GRANULE_MB) * MEM_GRANULE_MB)


def runtime_min(tool_seconds: float) -> int:
    """Whole minutes of wall time for a job whose tools may take `tool_seconds` in all."""
    if tool_seconds < 0:
        raise ValueError("tool_seconds must be >= 0")
    return int(math.ceil((tool_seconds + JOB_OVERHEAD_S) / 60))


def file_bytes(path) -> int:
    """Size of an input file. Snakemake evaluates a resource that reads a missing input
    again once the input exists (FileNotFoundError means 'to be determined')."""
    return os.path.getsize(path)


# --- export: the weights before the model exists ---------------------------------------

def _linear(config, shape, layers):
    _, k, n = shape
    return k * n  # nn.Linear(K, N, bias=False)


def _ln_linear(config, shape, layers):
    _, k, n = shape
    return 2 * k + k * n + n  # LayerNorm(K) weight and bias, Linear(K, N) with bias


def _mlp(config, shape, layers):
    _, k, n = shape
    return (layers or 2) * (k * n + n + n * k + k)  # Linear(K, N), Linear(N, K) per block


def _transformer_block(config, shape, layers):
    dim, _, hidden = BLOCK_CONFIGS[config]
    # Two RMSNorm weights, wqkv + wo (4 dim^2), SwiGLU w1, w3, w2 (3 dim hidden).
    return (layers or 1) * (2 * dim + 4 * dim * dim + 3 * dim * hidden)


def _torchao_transformer_block(config, shape, layers):
    _, k, _ = shape
    # Two RMSNorm weights, qkv + proj (4 K^2), MLP fc1 + fc2 (2 x 4 K^2), no biases.
    return 2 * k + 12 * k * k


def _bert(config, shape, layers):
    h, n_layers, _, inter = BERT_CONFIGS[config]
    positions = max(512, shape[1])
    embeddings = (VOCAB + positions + 2) * h + 2 * h  # word, position, token type; LayerNorm
    per_layer = (4 * (h * h + h)          # query, key, value, attention output
                 + 2 * h                  # attention LayerNorm
                 + h * inter + inter      # intermediate
                 + inter * h + h          # output
                 + 2 * h)                 # output LayerNorm
    pooler = h * h + h
    return embeddings + (layers or n_layers) * per_layer + pooler


# Model name -> parameter count from (config, shape, layers). A model not listed here
# (a newer built-in, or one from a suite's model_modules) is assumed as large as the
# largest built-in: over-asking memory queues a job longer, under-asking kills it.
PARAM_ESTIMATORS: dict[str, Callable] = {
    "linear": _linear,
    "mlp": _mlp,
    "transformer_block": _transformer_block,
    "torchao_transformer_block": _torchao_transformer_block,
    "bert": _bert,
    **{f"ln_linear_{act}": _ln_linear for act in ACTIVATIONS},
}


def param_estimate(model: str, config: str, shape, layers: int | None) -> int | None:
    """Parameters of a built-in model, or None when this module does not know the model."""
    fn = PARAM_ESTIMATORS.get(model)
    return fn(config, tuple(shape), layers) if fn else None


def fallback_params() -> int:
    """The largest built-in model: BERT large (about 335 M parameters)."""
    return _bert("large", (1, 512), None)


def _fp32_weight_bytes(workload) -> int:
    params = param_estimate(workload.model, workload.config, workload.shape, workload.layers)
    if params is not None:
        return params * BYTES_PER_ELEMENT["f32"]
    # A model this module does not know: its earlier export's MLIR holds exactly its
    # weights in the workload's dtype (scaled to the fp32 that export builds); without
    # one, the largest built-in (under-asking would kill the job).
    exported = EXPORT_MLIR.format(workload=workload.id)
    if os.path.exists(exported):
        return file_bytes(exported) * BYTES_PER_ELEMENT["f32"] // BYTES_PER_ELEMENT.get(
            workload.dtype, BYTES_PER_ELEMENT["f32"])
    return fallback_params() * BYTES_PER_ELEMENT["f32"]


def export_mem_mb(workload, attempt: int = 1) -> int:
    """MiB for exporting `workload` (a suite Workload: model, config, shape, layers);
    export builds the fp32 module whatever the workload's dtype."""
    return mem_request_mb("export", _fp32_weight_bytes(workload), attempt)


# Most exports an IREE batch makes at once (jobs/iree_batch.export_ahead), each a
# torch process of STAGE_MEMORY["export"]. The H100 check (16 cores) spent 11-18 s per
# export, 51 of a 4-case batch's 91 s, one after another; four at once cost the
# longest one, and four torch processes stay within a few GiB for the built-in models.
EXPORT_WORKERS_MAX = 4


def export_workers(exports: int, threads: int) -> int:
    """How many exports an IREE batch job with `threads` cores makes at once: one per
    core, at most EXPORT_WORKERS_MAX, never more than it has to make. A SLURM profile's
    one thread per job keeps them one at a time."""
    return max(1, min(exports, threads, EXPORT_WORKERS_MAX))


def iree_batch_mem_mb(workloads, attempt: int = 1, threads: int = 1) -> int:
    """MiB for an IREE batch job: the largest stage of its largest case (one stage runs
    at a time), or its exports made at once (export_workers: the largest ones together)
    where they need more, with the weights estimated before the module exists (the
    export's fp32 estimate also bounds the module the later stages load, whatever its
    dtype)."""
    weights = sorted(map(_fp32_weight_bytes, workloads), reverse=True)
    alone = max(mem_request_mb(stage, weights[0], attempt) for stage in STAGE_MEMORY)
    together = weights[:export_workers(len(weights), threads)]
    if len(together) < 2:
        return alone
    base, per_weight = STAGE_MEMORY["export"]
    need = (JOB_BASE_MB + sum(base + per_weight * w / MIB for w in together)) \
        * HEADROOM * attempt
    return max(alone, int(math.ceil(need / MEM_GRANULE_MB) * MEM_GRANULE_MB))


def iree_batch_runtime_min(workloads, measurement: dict, timeouts: dict, attempt: int = 1,
                           earlier=None) -> int:
    """Wall time of an IREE batch job: each case's expected time with a margin, capped
    by its stages' timeouts (`iree_case_seconds`; `earlier`: the cases' earlier records
    or None, in the order of `workloads`). A retry (attempt 2 on) asks for the worst
    case, every stage of every case at its timeout: the first try may have been stopped
    by this very limit."""
    worst = _iree_case_worst_s(measurement, timeouts)
    if attempt > 1:
        return runtime_min(len(workloads) * worst)
    earlier = earlier or [None] * len(workloads)
    return runtime_min(sum(iree_case_seconds(w, measurement, timeouts, e)
                           for w, e in zip(workloads, earlier, strict=True)))


def _iree_case_worst_s(measurement: dict, timeouts: dict) -> float:
    return (timeouts["export_s"] + timeouts["compile_s"] + timeouts["verify_s"]
            + _run_seconds(measurement, timeouts))


# Expected seconds of an IREE case's stages, calibrated on the 2-core x86 CI machine
# (file times of the default suite's cases; torch 2.13, IREE 3.13): export 4 s (linear,
# 0.25 MiB of weights) to 11 s (bert tiny, 17 MiB), including torch's import; compile
# 1 s (linear) to 5.4 s (bert tiny); verify under 1 s. Per stage: (seconds with no
# weights, seconds per MiB of fp32 weights).
STAGE_SECONDS = {
    "export": (4.0, 0.4),
    "compile": (1.0, 0.26),
    "verify": (1.0, 0.05),
}
# An iree-benchmark-module process beyond its warm-up and repetitions: start, module
# load, inputs (the default suite's cpu-host cases: 19 invocations of 0.2 s warm-up +
# 10 x 0.05 s took 20 to 25 s, about 0.4 s more each).
INVOCATION_START_S = 0.5
# Expected times are asked for this many times over: a cluster node, its file system
# and a model larger than the calibration points may all be slower; still minutes
# where the timeouts' sum is hours.
ESTIMATE_MARGIN = 3.0


def _stage_seconds(stage: str, weight_bytes: float) -> float:
    base, per_mib = STAGE_SECONDS[stage]
    return base + per_mib * weight_bytes / MIB


def invocation_count(measurement: dict) -> int:
    """Invocations one case may take: the first call, the adaptive maximum (or the fixed
    count, doubled for a noisy case's rerun) and every retake of a disturbed one."""
    m = measurement
    if m.get("max_invocations", 0) > m["invocations"]:
        counted = m["max_invocations"]
    else:
        counted = m["invocations"] * (2 if m.get("rerun_noisy") else 1)
    return 1 + counted + m.get("max_retakes", 0)


def invocation_seconds(measurement: dict, median_s: float = 0.0) -> float:
    """One invocation: warm-up, then `repetitions` repetitions of at least min_time_s
    (longer when one call takes longer: `median_s` from an earlier record)."""
    m = measurement
    return (INVOCATION_START_S + m.get("min_warmup_time_s", 0.0)
            + m.get("repetitions", 1) * max(m.get("min_time_s", 0.0), median_s))


def iree_case_seconds(workload, measurement: dict, timeouts: dict,
                      earlier: dict | None = None) -> float:
    """Expected seconds of one IREE case with the margin, at most its worst case. An
    earlier record of the case (`earlier_record`) gives its compile seconds and its
    median per call instead of the estimates."""
    weights = _fp32_weight_bytes(workload)
    compile_s = _stage_seconds("compile", weights)
    median_s = 0.0
    if earlier:
        compile_s = (earlier.get("compile") or {}).get("seconds") or compile_s
        median_s = ((earlier.get("timing") or {}).get("median_ms") or 0.0) / 1000
    measuring = invocation_count(measurement) * invocation_seconds(measurement, median_s)
    budget = measurement.get("budget_s")
    if budget and measurement.get("max_invocations", 0) > measurement["invocations"]:
        # Adaptive invocations stop after the one that spends budget_s (one more, and
        # the first call, at most), unless the minimum count takes longer.
        per = invocation_seconds(measurement, median_s)
        measuring = min(measuring, budget + 2 * per
                        + measurement["invocations"] * per)
    expected = (_stage_seconds("export", weights) + compile_s
                + _stage_seconds("verify", weights) + measuring)
    return min(ESTIMATE_MARGIN * expected, _iree_case_worst_s(measurement, timeouts))


def earlier_record(case) -> dict | None:
    """The case's record from an earlier run (results/cases/...), or None: absent, or
    not a record (a damaged one is measured again anyway, planning/plan.verify_batches)."""
    path = CASE.format(sku=case.sku, backend=case.backend, workload=case.workload.id,
                       recipe=case.recipe)
    try:
        record = read_json(path)
    except (OSError, ValueError, ConfigError):  # ConfigError: a FIFO or device there
        return None
    return record if isinstance(record, dict) and record.get("status") == "ok" else None


# A torch batch's worker holds a group of cases warm at once, their invocations
# interleaved (backends/torch/worker.groups): as many consecutive cases as their weights
# (case_weight_bytes) fit in this, a larger case alone.
GROUP_WEIGHT_BYTES = 256 << 20


def case_weight_bytes(workload: dict) -> int:
    """A torch case's weights as the stage estimates them (fp32; training: with gradients
    and AdamW's two moments, four copies), from its plan's workload."""
    params = param_estimate(workload["model"], workload["config"], tuple(workload["shape"]),
                            workload.get("layers"))
    copies = 4 if workload.get("mode", "inference") == "training" else 1
    return copies * (fallback_params() if params is None else params) \
        * BYTES_PER_ELEMENT["f32"]


def torch_batch_mem_mb(workloads, attempt: int = 1) -> int:
    """MiB for a run_torch job: its worker builds in fp32, like export (measured: an eager
    + inductor batch whose largest model holds 256 MiB of weights peaked at 970 MiB, below
    export's line), and holds a group of cases warm at once: the largest model, or
    GROUP_WEIGHT_BYTES of smaller ones. Training also holds gradients and AdamW's two
    moments: four copies of the weights."""
    weights = 0
    for w in workloads:
        params = param_estimate(w.model, w.config, w.shape, w.layers)
        copies = 4 if getattr(w, "mode", "inference") == "training" else 1
        weights = max(weights, copies * (fallback_params() if params is None else params))
    return mem_request_mb("export", max(weights * BYTES_PER_ELEMENT["f32"],
                                        GROUP_WEIGHT_BYTES), attempt)


# A torch worker process before its first case: python, torch and torchao imported
# (2-core CI machine: 1.5 to 3.5 s). One worker measures the whole batch.
TORCH_WORKER_START_S = 5.0
# One case in its worker before its invocations: the model built (and quantized) from its
# seed, the fp32 reference, accuracy, the per-op profile; torch.compile's compile when the
# backend compiles (an earlier record's compile seconds replace it; measured here 0.3 to
# 0.9 s for the default suite's linear cases with Inductor's caches warm, and up to ~20 s
# cold).
TORCH_BUILD_S = 1.0
TORCH_COMPILE_S = 20.0
# One invocation beyond its warm-up and timed block: the fork (or fresh input buffers)
# and torch.utils.benchmark's first estimate of the block's size.
TORCH_INVOCATION_S = 0.3
# A case's steps before its invocations, each of which has its own deadline of run_s
# (the worker's "tick" lines): reference, build, quantize, first call, accuracy, profile,
# and the graph statistics after them.
TORCH_CASE_STEPS = 7


def torch_case_seconds(case, measurement: dict, earlier: dict | None = None) -> float:
    """One torch case in its batch's worker: built, compiled where its backend compiles,
    characterized, then every invocation the protocol may take (the first call and
    compile time from an earlier record where it has them)."""
    m = measurement
    compiled = getattr(case, "compile_mode", None) is not None
    compile_s = TORCH_COMPILE_S if compiled else 0.0
    first_s = 0.0
    if earlier:
        compile_s = ((earlier.get("compile") or {}).get("seconds") or 0.0) if compiled else 0.0
        first_s = ((earlier.get("timing") or {}).get("first_run_ms") or 0.0) / 1000
    invocation_s = (TORCH_INVOCATION_S + m.get("torch_warmup_s", 0.0)
                    + m.get("torch_min_run_time_s", 0.0))
    return TORCH_BUILD_S + compile_s + first_s + invocation_count(m) * invocation_s


def torch_batch_runtime_min(cases, measurement: dict, timeouts: dict, attempt: int = 1,
                            earlier=None) -> int:
    """Wall time of a run_torch job: a worker's start, then each case whole (its steps and
    each invocation the protocol may take: `invocation_count`), expected from the plan
    and the cases' earlier records (`earlier`, in the order of `cases`), with the margin,
    at most the worst case (every step of every case at run_s), which a retry (attempt 2
    on) asks for."""
    steps = TORCH_CASE_STEPS + invocation_count(measurement)
    worst = len(cases) * steps * timeouts["run_s"]
    if attempt > 1:
        return runtime_min(worst)
    earlier = earlier or [None] * len(cases)
    expected = TORCH_WORKER_START_S + sum(
        torch_case_seconds(c, measurement, e) for c, e in zip(cases, earlier, strict=True))
    return runtime_min(min(ESTIMATE_MARGIN * expected, worst))


def ab_mem_mb(workload, attempt: int = 1) -> int:
    """MiB for an A/B job: two benchmark processes of the workload's module, one at a time."""
    return mem_request_mb("run", _fp32_weight_bytes(workload), attempt)


def torch_ab_mem_mb(pair, attempt: int = 1) -> int:
    """MiB for a torch A/B job: both sides' workers hold their model at once (a torch
    batch's worker holds one; suite/pairs.TorchPair)."""
    return 2 * torch_batch_mem_mb([pair.base.case.workload, pair.new.case.workload], attempt)


def ab_runtime_min(ab: dict, timeouts: dict) -> int:
    """An A/B job (IREE: after its export and two compiles) runs rounds until max_rounds
    or, from the plan's first look on, the first round after ab.budget_s: at most the
    fewer of max_rounds rounds and the budget plus the first look's and one more round,
    besides the retaken rounds and the two untimed first calls (two invocations a round,
    each up to run_s)."""
    from workflow.measure.plans import ab_plan

    run = timeouts["run_s"]
    rounds_s = min(2 * ab["max_rounds"] * run,
                   ab["budget_s"] + 2 * (ab_plan(ab).first_look + 1) * run)
    return runtime_min(timeouts["export_s"] + 2 * timeouts["compile_s"] + rounds_s
                       + (2 * ab["max_retakes"] + 2) * run)


def compile_runtime_min(timeouts: dict) -> int:
    return runtime_min(timeouts["compile_s"])


def run_runtime_min(measurement: dict, timeouts: dict, attempt: int = 1) -> int:
    """A benchmark file's timing job: what its invocations are expected to take with the
    margin, at most the worst case (the first call and every invocation the protocol may
    take, each up to run_s); a retry (attempt 2 on) asks for the worst case."""
    worst = _run_seconds(measurement, timeouts)
    if attempt > 1:
        return runtime_min(worst)
    expected = invocation_count(measurement) * invocation_seconds(measurement)
    return runtime_min(min(ESTIMATE_MARGIN * expected, worst))


def _run_seconds(measurement: dict, timeouts: dict) -> float:
    return invocation_count(measurement) * timeouts["run_s"]
