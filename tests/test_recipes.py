"""Recipe names, their torchao configs, and what a device cannot run."""

import pytest

from tests.conftest import tiny_suite, write_suite
from workflow.backends.torch.recipes import (
    Device,
    device_reason,
    layer_reason,
    parse,
    static_reason,
    torchao_config,
)
from workflow.errors import ConfigError
from workflow.suite.load import load

CPU = Device("cpu")
H100 = Device("cuda", (9, 0))
A100 = Device("cuda", (8, 0))


def test_parse_fixed_and_parametric_names():
    assert parse("int8wo").family == "int8wo" and not parse("baseline").quantized
    r = parse("int4wo-64-hqq")
    assert (r.family, r.group_size) == ("int4wo-hqq", 64)
    assert parse("float8dq-row").granularity == "row"
    assert parse("8da4w-32").group_size == 32
    for bad in ("int3", "int4wo-48", "int4wo", "baseline2", "float8dq-col", "int8wo.sparsity-x",
                "int8wo.sparsity-2:4"):
        with pytest.raises(ValueError, match="unknown recipe"):
            parse(bad)


def test_unknown_recipe_is_refused_at_load_time_with_its_name(tmp_path):
    cfg = tiny_suite(recipes=["baseline", "int8w0"])
    with pytest.raises(ConfigError) as err:
        load([write_suite(tmp_path / "s.yaml", cfg)])
    (problem,) = err.value.problems
    assert "recipes[1]: expected a recipe:" in problem and "'int8w0'" in problem


def test_configs_map_to_torchao_and_cpu_int4_uses_the_cpu_layout():
    from torchao import quantization as q

    assert isinstance(torchao_config(parse("int8wo"), CPU), q.Int8WeightOnlyConfig)
    assert isinstance(torchao_config(parse("int8dq"), CPU),
                      q.Int8DynamicActivationInt8WeightConfig)
    assert isinstance(torchao_config(parse("float8wo"), CPU), q.Float8WeightOnlyConfig)
    cpu4 = torchao_config(parse("int4wo-32"), CPU)
    assert isinstance(cpu4, q.IntxWeightOnlyConfig) and cpu4.granularity.group_size == 32
    hqq = torchao_config(parse("int4wo-128-hqq"), CPU)
    assert str(getattr(hqq.intx_choose_qparams_algorithm, "value",
                       hqq.intx_choose_qparams_algorithm)) == "hqq_scale_only"
    gpu4 = torchao_config(parse("int4wo-64"), H100)
    assert isinstance(gpu4, q.Int4WeightOnlyConfig) and gpu4.group_size == 64
    assert str(getattr(gpu4.int4_packing_format, "value",
                       gpu4.int4_packing_format)) == "tile_packed_to_4d"
    row = torchao_config(parse("float8dq-row"), H100)
    assert all(isinstance(g, q.PerRow) for g in row.granularity)  # (activation, weight)


def test_unsupported_reasons():
    assert "IREE" in static_reason(parse("int8wo"), backend_kind="iree", mode="inference")
    assert static_reason(parse("baseline"), backend_kind="iree", mode="inference") is None
    assert "inference only" in static_reason(parse("baseline"), backend_kind="iree",
                                             mode="training")
    assert static_reason(parse("int8wo"), backend_kind="eager", mode="training")
    assert "8.9" in device_reason(parse("float8dq-tensor"), device=CPU, dtype="bf16")
    assert "sm80" in device_reason(parse("float8dq-row"), device=A100, dtype="bf16")
    assert device_reason(parse("float8dq-row"), device=H100, dtype="bf16") is None
    assert device_reason(parse("float8wo"), device=CPU, dtype="f32") is None
    assert "bf16" in device_reason(parse("int4wo-32"), device=H100, dtype="f32")
    assert layer_reason(parse("int4wo-32"), [64, 128]) is None
    assert "K=[16]" in layer_reason(parse("int4wo-32"), [16, 64])
    assert layer_reason(parse("int8wo"), [3]) is None


def test_torchao_names_of_the_last_published_runner():
    # string_to_config at pytorch/ao dbef6992: "float8dq" (no suffix) is per tensor.
    from torchao import quantization as q

    alias = parse("float8dq")
    assert (alias.family, alias.granularity) == ("float8dq", "tensor")
    cfg = torchao_config(alias, H100)
    assert all(isinstance(g, q.PerTensor) for g in cfg.granularity)
    assert "8.9" in device_reason(alias, device=CPU, dtype="bf16")
    prefill = torchao_config(parse("int8dq_prefill_wo_decode"), CPU)
    assert isinstance(prefill, q.Int8DynamicActivationInt8WeightConfig)
    assert prefill.weight_only_decode is True
    intx = parse("int8_dynamic_activation_intx_weight-4-32-1")
    assert (intx.family, intx.bits, intx.group_size) == ("intx-opaque", 4, 32)
    assert parse("int8_dynamic_activation_intx_weight-8-0-0").group_size is None  # per axis
    assert "torch.float32" in device_reason(intx, device=CPU, dtype="bf16")
    assert "kernel library" in device_reason(intx, device=CPU, dtype="f32")
    assert device_reason(intx, device=Device("cpu", torchao_kernels=True), dtype="f32") is None
    c = torchao_config(intx, CPU)
    assert str(getattr(c.intx_packing_format, "value", c.intx_packing_format)) == \
        "opaque_torchao_auto"


def test_retired_names_are_unsupported_whatever_the_machine():
    for name, removed in (("marlin", "#3613"), ("marlin-qqq", "#3612"),
                          ("gemlitewo-4-64", "#4144"), ("fp6", "#3520"),
                          ("uintx-2-64-hqq", "#3887"), ("int8adq-int4w-symm", "#3723")):
        recipe = parse(name)
        assert recipe.family == "retired" and recipe.quantized
        why = static_reason(recipe, backend_kind="eager", mode="inference")
        assert removed in why and "removed from torchao" in why


def test_sparsity_recipes():
    semi = parse("baseline.sparsity-semi-sparse")
    assert (semi.family, semi.sparsity, semi.quantized) == ("baseline", "semi", True)
    assert parse("baseline.sparsity-2-4").sparsity == "semi"
    block = parse("baseline.sparsity-block")
    assert block.sparsity == "block"
    assert static_reason(semi, backend_kind="eager", mode="inference") is None
    assert "needs CUDA" in device_reason(semi, device=CPU, dtype="bf16")
    assert "sm80+" in device_reason(semi, device=Device("cuda", (7, 5)), dtype="bf16")
    assert device_reason(semi, device=A100, dtype="bf16") is None
    assert "block sparsity" in device_reason(block, device=CPU, dtype="bf16")
    # Quantized with sparsity: torchao's runner at dbef6992 quantized without it.
    why = static_reason(parse("int8dq.sparsity-2-4"), backend_kind="eager", mode="inference")
    assert "SemiSparseLayout #4148" in why
    assert "baseline only" in static_reason(parse("int8wo.sparsity-block"),
                                            backend_kind="eager", mode="inference")
    from torchao.sparsity.sparse_api import BlockSparseWeightConfig, SemiSparseWeightConfig

    assert isinstance(torchao_config(semi, A100), SemiSparseWeightConfig)
    assert isinstance(torchao_config(block, A100), BlockSparseWeightConfig)
