"""The suite schema and its validation."""

import pytest
import yaml

from tests.conftest import REPO, tiny_suite, write_suite
from workflow.errors import ConfigError
from workflow.suite.load import load
from workflow.suite.schema import load_schema, validate_suite


def walk(schema, path="<top>"):
    """Every (path, subschema) of the schema, $defs included."""
    yield path, schema
    for key in ("properties", "patternProperties", "$defs"):
        for name, sub in schema.get(key, {}).items():
            yield from walk(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], f"{path}[]")


def test_schema_is_2020_12_with_description_default_and_closed_objects():
    schema = load_schema()
    assert schema["$schema"].endswith("2020-12/schema")
    checked = 0
    for path, sub in walk(schema):
        # Containers of keys and $ref uses carry no own description; scalar list items
        # are described by their list.
        if "$ref" in sub or path.endswith((".properties", ".$defs", ".patternProperties")):
            continue
        if path.endswith("[]") and sub.get("type") != "object":
            continue
        assert "description" in sub, f"{path} has no description"
        assert "default" in sub, f"{path} has no default"
        if sub.get("type") == "object":
            assert sub.get("additionalProperties") is False, f"{path} is not closed"
        checked += 1
    assert checked > 40


def test_defaults_are_filled_in():
    cfg = validate_suite({"workloads": [{"model": "linear"}]}, "x.yaml")
    assert cfg["skus"] == {"cpu-host": cfg["skus"]["cpu-host"]}
    m = cfg["skus"]["cpu-host"]["measurement"]
    assert m == {"invocations": 6, "max_invocations": 24, "target_rel_width": 0.02,
                 "budget_s": 60, "repetitions": 10, "min_warmup_time_s": 0.5,
                 "min_time_s": 0.5, "noisy_cv": 0.10, "rerun_noisy": True,
                 "profile": True, "profile_calls": 10, "torch_warmup_calls": 10,
                 "torch_warmup_s": 0.2, "torch_min_run_time_s": 0.5,
                 "alpha": 0.05, "disturbed_share": 0.25, "max_retakes": 6,
                 "randomize_layout": True}
    assert cfg["workloads"][0]["dtypes"] == ["f32"]
    assert cfg["accuracy"]["f16"]["rtol"] == 1e-2


def test_every_problem_is_reported_with_file_and_key_path(tmp_path):
    bad = tiny_suite()
    bad["skus"]["host"]["measurement"]["invocations"] = 0
    bad["skus"]["host"]["iree"]["device"] = "cuda"
    bad["skus"]["generic"]["bogus"] = 1
    bad["workloads"].append({"model": "nope"})
    bad["workloads"].append({"model": "bert", "configs": ["huge"]})
    bad["workloads"].append({"model": "linear", "layers": 3})
    bad["workloads"].append({"model": "linear", "shapes": [[1, 2]]})
    path = write_suite(tmp_path / "bad.yaml", bad)
    with pytest.raises(ConfigError) as err:
        load([path])
    text = "\n".join(err.value.problems)
    assert all(p.startswith(f"{path}: ") for p in err.value.problems)
    assert "skus.host.measurement.invocations: expected minimum 1" in text
    # cuda is a device, but not one of an llvm-cpu SKU: the cross-key check, with the rest.
    assert ("skus.host.iree.device: 'cuda' does not run llvm-cpu code; expected local-task "
            "or local-sync for target_backend 'llvm-cpu'") in text
    assert "skus.generic: unknown key(s) ['bogus']" in text
    assert "workloads[2].model: expected one of [" in text
    assert "workloads[3].configs[0]: expected one of ['tiny', 'base', 'large'], got 'huge'" in text
    assert "workloads[4].layers: expected null" in text
    assert "workloads[5].shapes[0]: expected 3 items" in text
    assert len(err.value.problems) == 7


def test_yaml_syntax_errors_name_the_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("skus: [unclosed\n")
    with pytest.raises(ConfigError, match="broken.yaml: not valid YAML"):
        load([path])


def test_default_suite_is_valid_with_enough_iree_cases():
    suite = load([REPO / "config" / "config.yaml"])
    iree_cases = [c for c in suite.cases if c.backend == "iree"]
    assert len(iree_cases) >= 5
    assert len({c.workload.model for c in iree_cases}) >= 5


def test_later_files_and_overrides_win(tmp_path):
    a = write_suite(tmp_path / "a.yaml", tiny_suite())
    b = tmp_path / "b.yaml"
    b.write_text(yaml.safe_dump({"skus": {"host": {"torch": {"threads": 1}}}}))
    suite = load([a, b], overrides={"suite_name": "merged"})
    assert suite.config["suite_name"] == "merged"
    assert suite.sku("host")["torch"]["threads"] == 1
    assert suite.sku("host")["iree"]["target_cpu"] == "host"  # merged, not replaced


def test_defaults_fill_nested_objects_array_items_and_ref_definitions():
    raw = {
        "skus": {"a": {"measurement": {"invocations": 7}}, "b": {}},
        "workloads": [{"model": "linear"},
                      {"model": "mlp", "matrix_shapes": [{"name": "pow2"}]}],
        "torch_backends": {"torch-x": {"kind": "inductor"}},
        "accuracy": {"f16": {"rtol": 0.5}},
        "benchmark_files": {"golden_keys": {"a": "gpu"}},
    }
    before = yaml.safe_dump(raw)
    cfg = validate_suite(raw, "x.yaml")
    assert yaml.safe_dump(raw) == before  # the input is left as it was
    # Nested objects of a $ref'd SKU, reached through patternProperties.
    a, b = cfg["skus"]["a"], cfg["skus"]["b"]
    assert a["measurement"]["invocations"] == 7 and a["measurement"]["repetitions"] == 10
    assert b["measurement"] == {**a["measurement"], "invocations": 6}
    assert a["iree"] == {"target_backend": "llvm-cpu", "target_cpu": "host", "compile_flags": [],
                         "device": "local-task", "task_topology_max_group_count": 2,
                         "target_chip": None, "compile_tool": None, "benchmark_tool": None,
                         "allow_any_compile_flags": False}
    assert b["torch"] == {"threads": 0, "python": None} and b["description"] == ""
    # Workload items inside an array, and $ref'd items of their own arrays.
    w0, w1 = cfg["workloads"]
    assert w0 == {"model": "linear", "configs": [], "dtypes": ["f32"], "shapes": [],
                  "layers": None, "skus": [], "backends": [], "recipes": [],
                  "modes": ["inference"], "matrix_shapes": [], "device": "cpu",
                  "profiler": False, "memory_profiler": False, "memory_visualizer": False,
                  "group": None}
    assert w1["matrix_shapes"] == [{"name": "pow2", "shapes": [], "min_power": None,
                                    "max_power": None}]
    # A $ref'd definition: torch_backend, and tolerance whose default sits beside the $ref.
    assert cfg["torch_backends"] == {"torch-x": {"kind": "inductor", "compile_mode": "default",
                                                 "fullgraph": False}}
    assert cfg["accuracy"]["f16"] == {"rtol": 0.5, "atol": 1e-4, "min_pcc": 0.999}
    assert cfg["accuracy"]["bf16"] == {"rtol": 5e-2, "atol": 5e-2, "min_pcc": 0.98}
    # A default that is an object is filled, then filled in turn (fresh copies each time).
    assert cfg["benchmark_files"]["golden_keys"] == {"a": "gpu"}
    assert validate_suite({"workloads": [{"model": "linear"}]}, "y.yaml")["skus"]["cpu-host"][
        "measurement"]["invocations"] == 6
    assert load_schema()["properties"]["skus"]["default"] == {"cpu-host": {}}


def test_no_default_is_filled_inside_a_oneof_branch():
    # model_params is oneOf(list, entry): its entries keep what the file says (as they
    # always did), and the torchao translation reads them with its own fallbacks.
    cfg = validate_suite({"model_params": [{}, {"name": "n"}]}, "x.yaml")
    assert cfg["model_params"] == [{}, {"name": "n"}]
    assert validate_suite({"model_params": {"name": "n"}}, "x.yaml")["model_params"] == {
        "name": "n"}


def test_a_ref_property_carries_its_own_default():
    """Defaults are read from a property's own subschema (jsonschema's extend_with_default):
    a property that is a $ref must state its default beside it."""
    for path, sub in walk(load_schema()):
        for name, prop in sub.get("properties", {}).items():
            if "$ref" in prop:
                assert "default" in prop, f"{path}.{name}: $ref without a default beside it"
