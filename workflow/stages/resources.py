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

Wall time is the stage's own timeout (the suite's `timeouts`) plus the job overhead:
a stage that hits its timeout is recorded as a failed case, which only works if
SLURM's limit does not kill the job first.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

# The built-in models' size tables; these modules import torch only when a model is built.
from workflow.models.bert import BERT_CONFIGS, VOCAB
from workflow.models.layers import ACTIVATIONS, BLOCK_CONFIGS

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
    return (fallback_params() if params is None else params) * BYTES_PER_ELEMENT["f32"]


def export_mem_mb(workload, attempt: int = 1) -> int:
    """MiB for exporting `workload` (a suite Workload: model, config, shape, layers);
    export builds the fp32 module whatever the workload's dtype."""
    return mem_request_mb("export", _fp32_weight_bytes(workload), attempt)


def iree_batch_mem_mb(workloads, attempt: int = 1) -> int:
    """MiB for an IREE batch job: the largest stage of its largest case (one stage runs
    at a time), with the weights estimated before the module exists (the export's fp32
    estimate also bounds the module the later stages load, whatever its dtype)."""
    weights = max(map(_fp32_weight_bytes, workloads))
    return max(mem_request_mb(stage, weights, attempt) for stage in STAGE_MEMORY)


def iree_batch_runtime_min(cases: int, measurement: dict, timeouts: dict) -> int:
    """The worst case of an IREE batch job: every stage of every case at its timeout."""
    per_case = (timeouts["export_s"] + timeouts["compile_s"] + timeouts["verify_s"]
                + _run_seconds(measurement, timeouts))
    return runtime_min(cases * per_case)


def torch_batch_mem_mb(workloads, attempt: int = 1) -> int:
    """MiB for a run_torch job: its worker processes build one model at a time in fp32,
    like export (measured: an eager + inductor batch whose largest model holds 256 MiB of
    weights peaked at 970 MiB, below export's line). Training also holds gradients and
    AdamW's two moments: four copies of the weights."""
    weights = 0
    for w in workloads:
        params = param_estimate(w.model, w.config, w.shape, w.layers)
        copies = 4 if getattr(w, "mode", "inference") == "training" else 1
        weights = max(weights, copies * (fallback_params() if params is None else params))
    return mem_request_mb("export", weights * BYTES_PER_ELEMENT["f32"], attempt)


def torch_batch_runtime_min(cases: int, measurement: dict, timeouts: dict) -> int:
    """The worst case of a run_torch job: each pass (characterize, then each invocation,
    doubled for noisy reruns) gives every case up to run_s."""
    passes = 1 + measurement["invocations"] * (2 if measurement.get("rerun_noisy") else 1)
    return runtime_min(cases * passes * timeouts["run_s"])


def ab_mem_mb(workload, attempt: int = 1) -> int:
    """MiB for an A/B job: two benchmark processes of the workload's module, one at a time."""
    return mem_request_mb("run", _fp32_weight_bytes(workload), attempt)


def torch_ab_mem_mb(pair, attempt: int = 1) -> int:
    """MiB for a torch A/B job: both sides' workers hold their model at once (a torch
    batch's worker holds one; suite/pairs.TorchPair)."""
    return 2 * torch_batch_mem_mb([pair.base.case.workload, pair.new.case.workload], attempt)


def ab_runtime_min(ab: dict, timeouts: dict) -> int:
    """An A/B job stops at the first look after ab.budget_s; a look may come as late as
    max_rounds rounds (two invocations each, plus the two untimed first calls)."""
    return runtime_min(ab["budget_s"] + (2 * ab["max_rounds"] + 2) * timeouts["run_s"])


def compile_runtime_min(timeouts: dict) -> int:
    return runtime_min(timeouts["compile_s"])


def run_runtime_min(measurement: dict, timeouts: dict) -> int:
    """The worst case of a timing job: one first-call process, then `invocations`
    processes, twice as many when a noisy case is measured again, each up to run_s."""
    return runtime_min(_run_seconds(measurement, timeouts))


def _run_seconds(measurement: dict, timeouts: dict) -> float:
    invocations = measurement["invocations"] * (2 if measurement.get("rerun_noisy") else 1)
    return (1 + invocations) * timeouts["run_s"]
