"""Quantization recipes: names as torchao's microbenchmarks spell them, mapped to
torchao configs, with an explicit check of what a device can run.

An unknown name is an error at load time (torchao's runner silently ran unknown names
as baseline; we never do). A recipe a device cannot run is `unsupported` with the
reason, decided before anything runs, never by catching a failure.

Names follow `string_to_config` and `get_quantization_sparsity_recipes` of pytorch/ao
benchmarks/microbenchmarks (utils.py, benchmark_runner.py) at
dbef6992fb6bc20da9c121baedfa8125625ab641, the last published version, plus the names
earlier published versions handled (RETIRED: recorded as unsupported, never refused).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GROUP_SIZES = (32, 64, 128, 256)
_G = "|".join(map(str, GROUP_SIZES))
FIXED = ("baseline", "int8wo", "int8dq", "int8dq_prefill_wo_decode", "float8wo", "float8dq",
         "float8dq-tensor", "float8dq-row")
PARAMETRIC = {
    "int4wo": rf"int4wo-({_G})",
    "int4wo-hqq": rf"int4wo-({_G})-hqq",
    "8da4w": rf"8da4w-({_G})",
    # torchao: int8_dynamic_activation_intx_weight-<bits>-<group (0: per channel)>-<asym>
    "intx-opaque": r"int8_dynamic_activation_intx_weight-([1-8])-([0-9]+)-([A-Za-z0-9]+)",
}
# Names earlier published torchao runners quantized with, whose torchao configs or
# kernels torchao has since removed (the runner at dbef6992 ran most of them unquantized,
# as baseline, without a word). They are cases `unsupported` with this reason.
RETIRED = {
    r"marlin": "marlin: torchao's Marlin int4 2:4-sparse CUDA kernel (MarlinSparseLayout) "
               "was removed from torchao (#3613, 2026-01-13); the runner at dbef6992 ran the "
               "name unquantized",
    r"marlin-qqq": "marlin-qqq: torchao's Marlin QQQ CUDA kernel was removed from torchao "
                   "(#3612, 2026-01-13)",
    r"gemlitewo(-[0-9]+){0,2}": "gemlitewo: GemliteUIntXWeightOnlyConfig (gemlite's triton "
                                "kernels, CUDA) was removed from torchao (#4144, 2026-03-23); "
                                "the runner at dbef6992 ran the name unquantized",
    r"fp6": "fp6: FPXWeightOnlyConfig (quant_llm_linear, CUDA) was removed from torchao "
            "(#3520, 2026-01-05)",
    r"uintx-[0-9]+-[0-9]+(-hqq)?": "uintx: UIntXWeightOnlyConfig was removed from torchao "
                                   "(#3887, 2026-02-19)",
    r"int8adq-int4w-symm": "int8adq-int4w-symm: CutlassInt4PackedLayout (CUDA) was removed "
                           "from torchao (#3723, 2026-01-26)",
}
# torchao's sparsity recipe names (sparsity_config_recipe_names): "block" in the name is
# block sparsity, else "semi" or "2:4" is 2:4 semi-structured sparsity. A recipe name
# pairs a quantization with one as `<quantization>.sparsity-<name>`, ":" written "-"
# (case ids allow [A-Za-z0-9_.-] only): baseline.sparsity-block, int8dq.sparsity-2-4.
SPARSITY_PATTERN = r"[A-Za-z0-9_.:-]*(block|semi|2:4)[A-Za-z0-9_.:-]*"
_SPARSE_SUFFIX = r"\.sparsity-[A-Za-z0-9_.-]*(block|semi|2-4)[A-Za-z0-9_.-]*"
_QUANT = "|".join([*(re.escape(f) for f in FIXED), *PARAMETRIC.values(), *RETIRED])
RECIPE_PATTERN = f"^({_QUANT})({_SPARSE_SUFFIX})?$"
# Recipe.family as recipe names spell it: the families config `accuracy.recipes` may name.
FAMILY_NAMES = {"int8wo": "int8wo", "int8dq": "int8dq",
                "int8dq-prefill-wo-decode": "int8dq_prefill_wo_decode", "int4wo": "int4wo",
                "int4wo-hqq": "int4wo-hqq", "8da4w": "8da4w",
                "intx-opaque": "int8_dynamic_activation_intx_weight", "float8wo": "float8wo",
                "float8dq": "float8dq"}
# A key of `accuracy.recipes`: a family or a recipe name, but not baseline (the PCC rule).
ACCURACY_KEY_PATTERN = (f"^(?!baseline$)({'|'.join(map(re.escape, FAMILY_NAMES.values()))}"
                        f"|{_QUANT})({_SPARSE_SUFFIX})?$")
RECIPE_HELP = ("a recipe: " + ", ".join(FIXED) + ", int4wo-<group>, int4wo-<group>-hqq, "
               f"8da4w-<group> (group in {list(GROUP_SIZES)}), "
               "int8_dynamic_activation_intx_weight-<bits>-<group>-<asym>, torchao's retired "
               "names (marlin, marlin-qqq, gemlitewo-<bits>-<group>, fp6, uintx-<bits>-<group>, "
               "int8adq-int4w-symm; recorded unsupported), each optionally paired with a "
               "sparsity as <recipe>.sparsity-<semi-sparse|2-4|block>")


def sparsity_recipe_name(quantization: str, sparsity: str) -> str:
    """The benchflow recipe name of torchao's (quantization, sparsity) pair."""
    return f"{quantization}.sparsity-{sparsity.replace(':', '-')}"


def sparsity_kind(sparsity: str) -> str:
    """torchao's reading of a sparsity name: block if "block" is in it, else semi (2:4)."""
    return "block" if "block" in sparsity else "semi"


@dataclass(frozen=True)
class Recipe:
    name: str
    family: str            # baseline, int8wo, int8dq, int8dq-prefill-wo-decode, int4wo,
    #                        int4wo-hqq, 8da4w, intx-opaque, float8wo, float8dq, retired
    group_size: int | None = None
    granularity: str | None = None  # float8dq: tensor | row
    bits: int | None = None         # intx-opaque: weight bits
    sparsity: str | None = None     # semi | block: torchao's sparsity paired with it
    retired: str | None = None      # why torchao no longer runs it

    @property
    def quantized(self) -> bool:
        """Whether the recipe changes the module (quantization or sparsity)."""
        return self.family != "baseline" or self.sparsity is not None


def parse(name: str) -> Recipe:
    if not re.fullmatch(RECIPE_PATTERN, name):
        raise ValueError(f"unknown recipe {name!r}; expected {RECIPE_HELP}")
    quant, _, sparse = name.partition(".sparsity-")
    sparsity = sparsity_kind(sparse) if sparse else None
    return _parse_quantization(quant, name, sparsity)


def _parse_quantization(quant: str, name: str, sparsity: str | None) -> Recipe:
    if quant in ("baseline", "int8wo", "int8dq", "float8wo"):
        return Recipe(name, quant, sparsity=sparsity)
    if quant == "int8dq_prefill_wo_decode":
        return Recipe(name, "int8dq-prefill-wo-decode", sparsity=sparsity)
    if quant.startswith("float8dq"):
        # torchao: the part after the last "-" is the granularity; plain float8dq (and
        # anything but "row") is per tensor.
        gran = "row" if quant == "float8dq-row" else "tensor"
        return Recipe(name, "float8dq", granularity=gran, sparsity=sparsity)
    for pattern, why in RETIRED.items():
        if re.fullmatch(pattern, quant):
            return Recipe(name, "retired", sparsity=sparsity, retired=why)
    m = re.fullmatch(PARAMETRIC["intx-opaque"], quant)
    if m:
        group = int(m.group(2))
        return Recipe(name, "intx-opaque", group_size=group or None, bits=int(m.group(1)),
                      sparsity=sparsity)
    for family, pattern in PARAMETRIC.items():
        m = re.fullmatch(pattern, quant)
        if m:
            return Recipe(name, family, group_size=int(m.group(1)), sparsity=sparsity)
    raise ValueError(f"unknown recipe {name!r}; expected {RECIPE_HELP}")


@dataclass(frozen=True)
class Device:
    """What the running machine offers, probed once per process (see probe_device)."""

    kind: str                             # cpu | cuda
    cuda_capability: tuple[int, int] | None = None
    torchao_kernels: bool = False         # torchao's CPU kernel library (torch.ops.torchao) loaded


def static_reason(recipe: Recipe, *, backend_kind: str, mode: str) -> str | None:
    """Why a combination can never run, whatever the machine; None if it may."""
    if recipe.retired:
        return recipe.retired
    if recipe.sparsity and recipe.family != "baseline":
        if recipe.sparsity == "block":
            return (f"{recipe.name}: torchao pairs block sparsity with baseline only "
                    "(get_quantization_sparsity_recipes)")
        return (f"{recipe.name}: torchao's sparse layouts for quantized weights were removed "
                "(SemiSparseLayout #4148, Float8DynamicActivationFloat8SemiSparseWeightConfig "
                "#3883), so its runner at dbef6992 quantized without 2:4 sparsity; benchflow "
                "runs 2:4 sparsity as baseline.sparsity-<name> only")
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
    if recipe.sparsity:
        cc = device.cuda_capability
        if device.kind != "cuda" or cc is None or (recipe.sparsity == "semi" and cc < (8, 0)):
            what = ("2:4 semi-structured sparsity (cuSPARSELt/CUTLASS kernels, CUDA sm80+)"
                    if recipe.sparsity == "semi" else "block sparsity (BSR triton kernels)")
            where = device.kind + ("" if cc is None else f" sm{cc[0]}{cc[1]}")
            return f"{what} needs CUDA; torchao's runner skips it off CUDA ({where})"
    if recipe.family == "intx-opaque":
        if dtype != "f32":
            return ("int8_dynamic_activation_intx_weight needs high_precision_dtype "
                    f"torch.float32 (torchao asserts it), not {dtype}")
        if not device.torchao_kernels:
            return ("int8_dynamic_activation_intx_weight packs weights for torchao's CPU kernel "
                    "library (opaque_torchao_auto), which this torchao build does not load")
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


def min_sqnr_db(recipe: Recipe, accuracy: dict) -> float | None:
    """The SQNR threshold that judges the recipe's accuracy (a validated suite's
    `accuracy`: its `recipes` entry by name, else by family, else `min_sqnr_db`); None
    where the dtype's PCC rule judges it: baseline, and a sparsity recipe the suite does
    not name (torchao checks sparsity against the pruned module, not the dense one)."""
    rules = accuracy["recipes"]
    if recipe.name in rules:
        return rules[recipe.name]["min_sqnr_db"]
    if recipe.family == "baseline":
        return None
    family = FAMILY_NAMES.get(recipe.family)
    if family in rules:
        return rules[family]["min_sqnr_db"]
    return accuracy["min_sqnr_db"]


def torchao_config(recipe: Recipe, device: Device):
    """The torchao config object of a (supported) quantized recipe for this device.

    int4wo uses tinygemm's tensor-core layout (`tile_packed_to_4d`) on CUDA and torchao's
    CPU layout (int4 values unpacked to int8, IntxWeightOnlyConfig) on the CPU, where
    tensor-core layouts do not exist.
    """
    import torch
    from torchao import quantization as q

    f = recipe.family
    if f == "baseline" and recipe.sparsity:
        from torchao.sparsity.sparse_api import BlockSparseWeightConfig, SemiSparseWeightConfig

        return BlockSparseWeightConfig() if recipe.sparsity == "block" else SemiSparseWeightConfig()
    if f == "int8dq-prefill-wo-decode":
        return q.Int8DynamicActivationInt8WeightConfig(weight_only_decode=True)
    if f == "intx-opaque":
        # As torchao's string_to_config: bool() of the 4th field, so any value is asymmetric.
        gran = q.PerGroup(recipe.group_size) if recipe.group_size else q.PerAxis(0)
        return q.Int8DynamicActivationIntxWeightConfig(
            weight_dtype=getattr(torch, f"int{recipe.bits}"), weight_granularity=gran,
            weight_mapping_type=q.MappingType.ASYMMETRIC,
            intx_packing_format="opaque_torchao_auto")
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


def apply(module, recipe: Recipe, device: Device) -> None:
    """Applies a (supported) recipe to the module in place, as torchao's runner does:
    sparsify_ for baseline with a sparsity, quantize_ otherwise."""
    config = torchao_config(recipe, device)
    if recipe.family == "baseline":
        from torchao.sparsity import sparsify_

        sparsify_(module, config)
    else:
        from torchao.quantization import quantize_

        quantize_(module, config)


def torchao_kernels_loaded() -> bool:
    """Whether torchao's CPU kernel library is loaded (its own check, which quantizing
    with intx_packing_format="opaque_torchao_auto" asserts)."""
    from torchao.quantization.quantize_.workflows.intx.intx_opaque_tensor import (
        _is_kernel_library_loaded,
    )

    return bool(_is_kernel_library_loaded())
