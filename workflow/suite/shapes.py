"""Matrix-shape generators of torchao's microbenchmarks: each returns an exact list of
(name, [M, K, N]). Every generator, its names and its defaults follow
`get_shapes_for_config` in pytorch/ao benchmarks/microbenchmarks/benchmark_runner.py at
dbef6992fb6bc20da9c121baedfa8125625ab641, the last published version (upstream deleted
the microbenchmarks in the next commit)."""

from __future__ import annotations

import json
from itertools import product

# Llama-2-70B single-node weight shapes, fused attn.wqkv and ffn.w13, at
# batch 4 x sequence 4096 = 16384 tokens.
LLAMA_M = 16384
LLAMA_SHAPES = {
    "attn.wqkv": (8192, 1280),
    "attn.w0": (1024, 8192),
    "ffn.w13": (8192, 7168),
    "ffn.w2": (3584, 8192),
}

# Fixed model shapes, (label, (M, K, N)) in torchao's order; the case names are
# f"{generator}_{label}" (labels repeat: torchao names both M of a model alike). From
# get_shapes_for_config in pytorch/ao benchmarks/microbenchmarks/benchmark_runner.py at
# dbef6992fb6bc20da9c121baedfa8125625ab641 (added in 72d0f494, #3438).
MODEL_SHAPES = {
    "llama4": [
        ("FFN", (16384, 8192, 5120)),
        ("QO_proj", (16384, 8192, 8192)),
        ("KV_proj", (16384, 8192, 1024)),
        ("FFN", (128000, 8192, 5120)),
        ("QO_proj", (128000, 8192, 8192)),
        ("KV_proj", (128000, 8192, 1024)),
    ],
    "deepseek_v3_236b": [
        ("FFN", (16384, 1536, 5120)),
        ("QKVO_proj", (16384, 7168, 7168)),
        ("FFN", (128000, 1536, 5120)),
        ("QKVO_proj", (128000, 7168, 7168)),
    ],
    "deepseek_v3_671b": [
        ("FFN", (16384, 2048, 7168)),
        ("QKVO_proj", (16384, 7168, 7168)),
        ("FFN", (128000, 2048, 7168)),
        ("QKVO_proj", (128000, 7168, 7168)),
    ],
    "qwen3_32b": [
        ("QO_proj", (16384, 5120, 5120)),
        ("KV_proj", (16384, 5120, 640)),
        ("QO_proj", (128000, 5120, 5120)),
        ("KV_proj", (128000, 5120, 640)),
    ],
    "gemma3_27b": [
        ("QO_proj", (16384, 4096, 4096)),
        ("KV_proj", (16384, 4096, 1024)),
        ("QO_proj", (128000, 4096, 4096)),
        ("KV_proj", (128000, 4096, 1024)),
    ],
}

# (default min_power, default max_power) of the generators that take them.
POWER_DEFAULTS = {
    "pow2": (10, 14),
    "pow2_extended": (10, 14),
    "small_sweep": (10, 14),
    "sweep": (8, 15),
}
GENERATORS = ("custom", "llama", *MODEL_SHAPES, *POWER_DEFAULTS)


def _powers(spec: dict, name: str) -> range:
    lo, hi = POWER_DEFAULTS[name]
    lo = lo if spec.get("min_power") is None else spec["min_power"]
    hi = hi if spec.get("max_power") is None else spec["max_power"]
    return range(lo, hi + 1)


def spec_problems(spec: dict) -> list[str]:
    """'key: what was expected' for what the schema cannot see in one generator spec: an
    empty power range (min_power above max_power, either one torchao's default), and
    pow2_extended from 2^0, whose 2^p + 2^(p-1) is no integer."""
    name = spec["name"]
    if name not in POWER_DEFAULTS:
        return []
    powers = _powers(spec, name)
    lo, hi = powers.start, powers.stop - 1
    if lo > hi:
        key = "min_power" if spec.get("min_power") is not None else "max_power"
        told = [f"{k} {v}" + ("" if spec.get(k) is not None else f" ({name}'s default)")
                for k, v in (("min_power", lo), ("max_power", hi))]
        return [f"{key}: expected min_power <= max_power, got {told[0]} > {told[1]}"]
    if name == "pow2_extended" and lo == 0:
        return ["min_power: expected at least 1 for pow2_extended (2^p + 2^(p-1) is not an "
                "integer for p = 0), got 0"]
    return []


def count(spec: dict) -> int:
    """How many shapes generate(spec) gives, without building them."""
    name = spec["name"]
    if name == "custom":
        return len(spec.get("shapes", []))
    if name == "llama":
        return len(LLAMA_SHAPES)
    if name in MODEL_SHAPES:
        return len(MODEL_SHAPES[name])
    n = max(len(_powers(spec, name)), 0)
    if name == "pow2":
        return n
    if name == "pow2_extended":
        return 2 * n
    if name == "sweep":
        return n ** 3
    return n * (n + 1) * (n + 2) // 6  # small_sweep: m <= k <= n, with repetition


def generate(spec: dict) -> list[tuple[str, list[int]]]:
    """Shapes of one generator spec, e.g. {"name": "sweep", "min_power": 8, "max_power": 9}."""
    name = spec["name"]
    if name == "custom":
        return [(name, list(s)) for s in spec.get("shapes", [])]
    if name == "llama":
        return [(f"llama_{k}", [LLAMA_M, kk, n]) for k, (kk, n) in LLAMA_SHAPES.items()]
    if name in MODEL_SHAPES:
        return [(f"{name}_{label}", list(mkn)) for label, mkn in MODEL_SHAPES[name]]
    if name == "pow2":
        return [(f"pow2_{i}", [2**p] * 3) for i, p in enumerate(_powers(spec, name))]
    if name == "pow2_extended":
        out = []
        for i, p in enumerate(_powers(spec, name)):
            out.append((f"pow2_extended_{2 * i}", [2**p] * 3))
            out.append((f"pow2_extended_{2 * i + 1}", [2**p + 2 ** (p - 1)] * 3))
        return out
    if name in ("sweep", "small_sweep"):
        increasing_only = name == "small_sweep"
        out = []
        for pm, pk, pn in product(_powers(spec, name), repeat=3):
            m, k, n = 2**pm, 2**pk, 2**pn
            if increasing_only and not m <= k <= n:
                continue
            out.append((f"{name}_{len(out)}", [m, k, n]))
        return out
    raise ValueError(f"unknown shape generator {name!r}; expected one of {list(GENERATORS)}")


def generate_all(specs: list[dict]) -> list[list[int]]:
    """The shapes of several generator specs, in order, duplicates dropped."""
    seen, out = set(), []
    for spec in specs:
        for _, shape in generate(spec):
            if tuple(shape) not in seen:
                seen.add(tuple(shape))
                out.append(shape)
    return out


def unique_shapes(shapes: list, generators: list[dict], limit: int) -> list | None:
    """The explicit shapes then the generators' shapes, duplicates dropped, as tuples;
    None as soon as there are more than `limit` (no more are built than that)."""
    seen: dict[tuple, None] = {}
    specs = {json.dumps(g, sort_keys=True): g for g in generators}  # alike ones once
    for shape in shapes:
        seen[tuple(shape)] = None
        if len(seen) > limit:
            return None
    for gen in specs.values():
        if len(seen) + count(gen) <= limit:
            seen.update((tuple(s), None) for _, s in generate(gen))
            continue
        for _, shape in generate(gen):
            seen[tuple(shape)] = None
            if len(seen) > limit:
                return None
    return list(seen)


# Bytes per element of the workload dtypes.
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2}


def gemm_bytes(shape, dtype: str) -> int:
    """The least memory an [M, K, N] case needs: its input M x K, weight K x N and output
    M x N in its dtype (the model, its reference and the compiled code need more)."""
    m, k, n = shape
    return (m * k + k * n + m * n) * DTYPE_BYTES[dtype]


def physical_memory_bytes() -> int | None:
    """This machine's physical memory; None where the OS does not tell."""
    import os

    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def memory_reason(shape, dtype: str, available: int | None) -> str | None:
    """Why an [M, K, N] case cannot run on a machine with `available` bytes; None if it may."""
    need = gemm_bytes(shape, dtype)
    if available is None or need <= available:
        return None
    return (f"{list(shape)} needs ~{need / 2**30:.1f} GiB (inputs, weights and output in "
            f"{dtype}) but this machine has {available / 2**30:.1f} GiB")
