"""torchao microbenchmark files run as suites, unchanged."""

import pytest
import yaml

from tests.conftest import DATA
from workflow.errors import ConfigError
from workflow.suite.load import load

TORCHAO_FILE = DATA / "torchao_microbenchmark.yml"


def test_a_torchao_file_expands_to_torch_cases():
    suite = load([TORCHAO_FILE])
    ids = sorted(c.id for c in suite.cases)
    shapes = ["16x64x64", "32x64x128", "32x32x32"]
    assert ids == sorted(f"cpu-host/torch-eager/ln_linear_sigmoid-{s}-f32/{r}"
                         for s in shapes for r in ("baseline", "int8wo", "float8dq-tensor"))
    w = suite.workloads["ln_linear_sigmoid-16x64x64-f32"]
    assert (w.group, w.profiler, w.memory_profiler, w.device) == ("small_linear", True, True,
                                                                 "cpu")
    # One worker for the SKU's nine cases, every recipe.
    assert set(suite.torch_batches) == {("cpu-host", "b0")}
    assert len(suite.torch_batches[("cpu-host", "b0")]) == 9


def test_compile_modes_and_single_entry_form(tmp_path):
    data = yaml.safe_load(TORCHAO_FILE.read_text())
    entry = data["model_params"][0]
    entry.update(use_torch_compile=True, high_precision_dtype="torch.bfloat16")
    data["model_params"] = entry  # older torchao files give one mapping
    path = tmp_path / "t.yml"
    path.write_text(yaml.safe_dump(data))
    suite = load([path])
    # torchao compiles with fullgraph=True; use_torch_compile is torchao v1's key: true
    # measured the compiled module only.
    assert suite.config["torch_backends"]["torch-inductor-max-autotune"] == {
        "kind": "inductor", "compile_mode": "max-autotune", "fullgraph": True}
    backends = {c.backend for c in suite.cases}
    assert backends == {"torch-inductor-max-autotune"}
    case = next(c for c in suite.cases if c.backend == "torch-inductor-max-autotune")
    assert case.compile_mode == "max-autotune" and case.workload.dtype == "bf16"
    # Without use_torch_compile (current torchao): eager and torch.compile, always.
    del entry["use_torch_compile"]
    path.write_text(yaml.safe_dump(data))
    assert {c.backend for c in load([path]).cases} == {"torch-eager",
                                                        "torch-inductor-max-autotune"}


def test_torchao_problems_name_the_entry(tmp_path):
    data = yaml.safe_load(TORCHAO_FILE.read_text())
    data["model_params"][0]["model_type"] = "conv9000"
    data["quantization_config_recipe_names"].append("int3wo")
    path = tmp_path / "t.yml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        load([path])
    assert any("quantization_config_recipe_names[2]: expected a recipe" in p
               for p in err.value.problems)
    data["quantization_config_recipe_names"].pop()
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"model_params\[0\].model_type: unknown model "
                                          r"'conv9000'"):
        load([path])
