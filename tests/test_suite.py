"""Suite expansion into workloads and cases."""

import pytest

from tests.conftest import tiny_suite, write_suite
from workflow.errors import ConfigError
from workflow.paths import case_path
from workflow.suite.load import load


def test_expansion_is_the_cross_product(tmp_path):
    suite_cfg = tiny_suite(workloads=[
        {"model": "linear", "shapes": [[8, 16, 16], [16, 16, 16]], "dtypes": ["f32", "f16"]},
        {"model": "bert", "configs": ["tiny", "base"], "layers": 1, "shapes": [[1, 8]]},
    ])
    suite = load([write_suite(tmp_path / "s.yaml", suite_cfg)])
    assert sorted(suite.workloads) == sorted([
        "linear-8x16x16-f32", "linear-8x16x16-f16", "linear-16x16x16-f32",
        "linear-16x16x16-f16", "bert-tiny-L1-1x8-f32", "bert-base-L1-1x8-f32"])
    assert len(suite.cases) == 6 * 2  # two SKUs, one backend, one recipe
    case = suite.case("generic", "iree", "bert-tiny-L1-1x8-f32", "baseline")
    assert case.id == "generic/iree/bert-tiny-L1-1x8-f32/baseline"
    assert case_path(case) == "results/cases/generic/iree/bert-tiny-L1-1x8-f32/baseline.json"
    ident = case.identity()
    assert ident["shape"] == [1, 8] and ident["layers"] == 1 and ident["mode"] == "inference"


def test_default_shape_and_config_are_used_when_not_given(tmp_path):
    suite = load([write_suite(tmp_path / "s.yaml", tiny_suite(workloads=[{"model": "bert"}]))])
    (w,) = suite.workloads.values()
    assert w.id == "bert-tiny-f32" and w.shape == (1, 128) and w.config == "tiny"


def test_workload_sku_selection_and_unknown_skus(tmp_path):
    cfg = tiny_suite(workloads=[{"model": "linear", "skus": ["host"]}])
    suite = load([write_suite(tmp_path / "s.yaml", cfg)])
    assert [c.sku for c in suite.cases] == ["host"]
    cfg = tiny_suite(workloads=[{"model": "linear", "skus": ["nowhere"]}])
    with pytest.raises(ConfigError, match=r"workloads\[0\].skus: unknown SKU 'nowhere'"):
        load([write_suite(tmp_path / "s.yaml", cfg)])


def test_duplicate_cases_and_conflicting_workloads_are_refused(tmp_path):
    cfg = tiny_suite(workloads=[{"model": "linear"}, {"model": "linear", "configs": ["default"]}])
    with pytest.raises(ConfigError, match=r"workloads\[1\]: case host/iree/linear-f32/baseline "
                                          r"is already defined by workloads\[0\]"):
        load([write_suite(tmp_path / "s.yaml", cfg)])
    cfg = tiny_suite(workloads=[{"model": "linear"},
                                {"model": "linear", "backends": ["torch-eager"], "group": "g"}])
    with pytest.raises(ConfigError, match=r"workload linear-f32 is defined differently"):
        load([write_suite(tmp_path / "s.yaml", cfg)])
    # the same workload on other backends is fine
    cfg = tiny_suite(workloads=[{"model": "linear"},
                                {"model": "linear", "backends": ["torch-eager"]}])
    assert len(load([write_suite(tmp_path / "s.yaml", cfg)]).workloads) == 1


def test_model_modules_register_models_relative_to_the_suite(tmp_path):
    # A model of its own: a copy of tests/data/extra_models.py would register its
    # names a second time from another file, which the registry refuses.
    (tmp_path / "models.py").write_text(
        "from workflow.models.registry import benchmark_model\n\n\n"
        "@benchmark_model(default_shape=(2, 2), shape_doc='[a, b]')\n"
        "def relative_model(config, dtype, layers, shape):\n"
        "    \"\"\"A model registered from a file next to the suite.\"\"\"\n")
    cfg = tiny_suite(model_modules=["models.py"], workloads=[{"model": "relative_model"}])
    suite = load([write_suite(tmp_path / "s.yaml", cfg)])
    (w,) = suite.workloads.values()
    assert w.spec()["model_modules"] == [str((tmp_path / "models.py").resolve())]


def test_a_broken_model_module_is_a_config_error(tmp_path):
    (tmp_path / "broken.py").write_text("raise RuntimeError('nope')\n")
    cfg = tiny_suite(model_modules=["broken.py"])
    with pytest.raises(ConfigError, match=r"model_modules\[0\]: could not import .*nope"):
        load([write_suite(tmp_path / "s.yaml", cfg)])
