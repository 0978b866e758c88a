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
    for bad in ("int3", "int4wo-48", "int4wo", "baseline2", "float8dq"):
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
