"""The model registry and the built-in models."""

import pytest
import torch

from workflow.models.layers import ACTIVATIONS
from workflow.models.registry import all_models, benchmark_model, get_model


def test_builtin_models_are_registered():
    names = set(all_models())
    expected = {"linear", "mlp", "transformer_block", "bert"}
    expected |= {f"ln_linear_{a}" for a in ACTIVATIONS}
    assert expected <= names
    assert set(ACTIVATIONS) == {"relu", "sigmoid", "leakyrelu", "relu6", "gelu", "silu",
                                "hardswish"}
    assert get_model("bert").configs == ("tiny", "base", "large")


def test_registering_a_name_twice_fails():
    with pytest.raises(ValueError, match="twice"):
        benchmark_model(name="linear", default_shape=(1,), shape_doc="")(lambda **k: None)


# Their builders import transformers (seconds, once per process): the slow tier.
TRANSFORMERS_MODELS = {"gpt2", "llama", "minilm"}


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) if n in TRANSFORMERS_MODELS else n
    for n in sorted(set(all_models()) - {"bert"})])
def test_layer_models_run_and_are_seeded(name):
    spec = get_model(name)
    a = spec.build(spec.default_config, "f32", None, None)
    b = spec.build(spec.default_config, "f32", None, None)
    with torch.no_grad():
        out_a, out_b = a.module(*a.inputs), b.module(*b.inputs)
    assert torch.equal(out_a, out_b)  # same seed, same weights and inputs
    # Token ids (gpt2, llama, minilm) stay int64; every float input is f32.
    assert all(x.dtype == torch.float32 for x in a.inputs if x.is_floating_point())
    assert a.flops and a.flops > 0


def test_dtype_casts_module_and_float_inputs():
    inst = get_model("linear").build("default", "bf16", None, (4, 8, 8))
    assert inst.inputs[0].dtype == torch.bfloat16
    assert next(inst.module.parameters()).dtype == torch.bfloat16


@pytest.mark.slow
def test_bert_layer_override_and_shape():
    inst = get_model("bert").build("tiny", "f32", 1, (2, 16))
    assert inst.module.config.num_hidden_layers == 1
    assert inst.module.config.hidden_size == 128
    assert inst.inputs[0].shape == (2, 16) and inst.inputs[0].dtype == torch.int64
    with torch.no_grad():
        out = inst.module(*inst.inputs)
    assert out.last_hidden_state.shape == (2, 16, 128)


def test_mlp_layers_set_depth():
    one = get_model("mlp").build("default", "f32", 1, (4, 8, 16))
    three = get_model("mlp").build("default", "f32", 3, (4, 8, 16))
    assert len(three.module) == 3 * len(one.module)
    assert three.flops == 3 * one.flops
