"""Quantization recipes: names as torchao's microbenchmarks spell them, mapped to
torchao configs, with an explicit check of what a device can run.

An unknown name is an error at load time (torchao's runner silently ran unknown names
as baseline; we never do). A recipe a device cannot run is `unsupported` with the
reason, decided before anything runs, never by catching a failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GROUP_SIZES = (32, 64, 128, 256)
_G = "|".join(map(str, GROUP_SIZES))
FIXED = ("baseline", "int8wo", "int8dq", "float8wo", "float8dq-tensor", "float8dq-row")
PARAMETRIC = {
    "int4wo": rf"int4wo-({_G})",
    "int4wo-hqq": rf"int4wo-({_G})-hqq",
    "8da4w": rf"8da4w-({_G})",
}
RECIPE_PATTERN = "^(" + "|".join([*(re.escape(f) for f in FIXED), *PARAMETRIC.values()]) + ")$"
RECIPE_HELP = ("a recipe: " + ", ".join(FIXED) + ", int4wo-<group>, int4wo-<group>-hqq, "
               f"8da4w-<group> (group in {list(GROUP_SIZES)})")


@dataclass(frozen=True)
class Recipe:
    name: str
    family: str            # baseline, int8wo, int8dq, int4wo, int4wo-hqq, 8da4w, float8wo, float8dq
    group_size: int | None = None
    granularity: str | None = None  # float8dq: tensor | row

    @property
    def quantized(self) -> bool:
        return self.family != "baseline"


def parse(name: str) -> Recipe:
    if name in ("baseline", "int8wo", "int8dq", "float8wo"):
        return Recipe(name, name)
    if name in ("float8dq-tensor", "float8dq-row"):
        return Recipe(name, "float8dq", granularity=name.split("-")[1])
    for family, pattern in PARAMETRIC.items():
        m = re.fullmatch(pattern, name)
        if m:
            return Recipe(name, family, group_size=int(m.group(1)))
    raise ValueError(f"unknown recipe {name!r}; expected {RECIPE_HELP}")


@dataclass(frozen=True)
class Device:
    """What the running machine offers, probed once per process (see probe_device)."""

    kind: str                             # cpu | cuda
    cuda_capability: tuple[int, int] | None = None


def static_reason(recipe: Recipe, *, backend_kind: str, mode: str) -> str | None:
    """Why a combination can never run, whatever the machine; None if it may."""
    if backend_kind == "iree" and recipe.quantized:
        return ("torchao recipes quantize torch modules; the IREE backend compiles the "
                "exported model and runs only `baseline`")
    if backend_kind == "iree" and mode == "training":
        return "the IREE backend benchmarks inference only"
    if mode == "training" and recipe.quantized:
        return (f"{recipe.name} is an inference recipe; training runs baseline "
                "(torchao's float8 training needs CUDA compute capability >= 8.9)")
    return None


def device_reason(recipe: Recipe, *, device: Device, dtype: str) -> str | None:
    """Why this device cannot run the recipe in this dtype, or None. Pure: the device
    is probed by the caller (the torch job, on the machine that measures)."""
    if recipe.family == "float8dq":
        cc = device.cuda_capability
        if device.kind != "cuda" or cc is None or cc < (8, 9):
            where = device.kind + ("" if cc is None else f" sm{cc[0]}{cc[1]}")
            return f"float8 dynamic quantization needs CUDA compute capability >= 8.9 ({where})"
    if recipe.family in ("int4wo", "int4wo-hqq") and device.kind == "cuda" and dtype != "bf16":
        return "int4 weight-only on CUDA (tinygemm tile layout) takes bf16 only"
    return None


def layer_reason(recipe: Recipe, in_features: list[int]) -> str | None:
    """Group-wise recipes quantize groups of `group_size` input features: every linear
    layer's K must be a multiple of it."""
    if recipe.group_size:
        bad = sorted({k for k in in_features if k % recipe.group_size})
        if bad:
            return (f"{recipe.name} quantizes groups of {recipe.group_size} input features; "
                    f"linear layers with K={bad} are not multiples of it")
    return None


def torchao_config(recipe: Recipe, device: Device):
    """The torchao config object of a (supported) quantized recipe for this device.

    int4wo uses tinygemm's tensor-core layout (`tile_packed_to_4d`) on CUDA and torchao's
    CPU layout (int4 values unpacked to int8, IntxWeightOnlyConfig) on the CPU, where
    tensor-core layouts do not exist.
    """
    import torch
    from torchao import quantization as q

    f = recipe.family
    if f == "int8wo":
        return q.Int8WeightOnlyConfig()
    if f == "int8dq":
        return q.Int8DynamicActivationInt8WeightConfig()
    if f == "float8wo":
        return q.Float8WeightOnlyConfig()
    if f == "float8dq":
        gran = q.PerTensor() if recipe.granularity == "tensor" else q.PerRow()
        return q.Float8DynamicActivationFloat8WeightConfig(granularity=gran)
    if f == "8da4w":
        return q.Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4, weight_granularity=q.PerGroup(recipe.group_size))
    if f in ("int4wo", "int4wo-hqq"):
        hqq = f == "int4wo-hqq"
        if device.kind == "cuda":
            return q.Int4WeightOnlyConfig(
                group_size=recipe.group_size, int4_packing_format="tile_packed_to_4d",
                int4_choose_qparams_algorithm="hqq" if hqq else "tinygemm")
        return q.IntxWeightOnlyConfig(
            weight_dtype=torch.int4, granularity=q.PerGroup(recipe.group_size),
            intx_choose_qparams_algorithm="hqq_scale_only" if hqq else "affine")
    raise ValueError(f"{recipe.name} has no torchao config")
