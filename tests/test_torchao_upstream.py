"""torchao's published microbenchmark YAML files (tests/data/upstream/torchao, see its
SOURCES.md) run unchanged as benchflow suites, with torchao's semantics."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import DATA, snakemake, write_suite
from workflow.backends.torch.recipes import parse
from workflow.errors import ConfigError
from workflow.suite.load import load
from workflow.suite.schema import load_schema

UPSTREAM = DATA / "upstream" / "torchao"
PUBLISHED = sorted((UPSTREAM / "published").glob("*.yml"))
CPU = sorted((UPSTREAM / "cpu").glob("*.yml"))
LAST = "dbef6992fb6b"
DASHBOARD = UPSTREAM / "published" / f"{LAST}.dashboard.microbenchmark_quantization_config.yml"
TEST_CONFIG = UPSTREAM / "published" / f"{LAST}.microbenchmarks.test.benchmark_config.yml"
CPU_TEST_CONFIG = UPSTREAM / "cpu" / f"{LAST}.microbenchmarks.test.benchmark_config.cpu.yml"
VISUALIZER = UPSTREAM / "unpublished" / "271798744705.microbenchmarks.test.benchmark_config.yml"
DRAFTS = sorted((UPSTREAM / "unpublished").glob("6ad94dc9c980.*.yml"))


def published(commit: str, name: str = "microbenchmarks.test.benchmark_config") -> Path:
    return UPSTREAM / "published" / f"{commit}.{name}.yml"


def test_the_test_data_is_every_published_version_with_its_source():
    assert len(PUBLISHED) == 13 and len(CPU) == 2 and len(DRAFTS) == 2
    sources = (UPSTREAM / "SOURCES.md").read_text()
    for path in [*PUBLISHED, *CPU, VISUALIZER, *DRAFTS]:
        rel = path.relative_to(UPSTREAM).as_posix()
        assert f"`{rel}`" in sources, rel
        if path.parent.name != "cpu":  # named by the first 12 digits of its commit
            commit = path.name.split(".")[0]
            assert re.search(rf"`{re.escape(rel)}` \| `[^`]+` \| {commit}[0-9a-f]{{28}}",
                             sources), rel
    # The CPU copies differ from the dbef6992 files in the device only.
    for cpu in CPU:
        original = UPSTREAM / "published" / cpu.name.replace(".cpu.yml", ".yml")
        assert cpu.read_text() == original.read_text().replace('device: "cuda"', 'device: "cpu"')
        assert 'device: "cuda"' in original.read_text()


@pytest.mark.parametrize("path", [*PUBLISHED, *CPU, VISUALIZER], ids=lambda p: p.name)
def test_every_upstream_file_validates_and_expands(path):
    suite = load([path])
    assert suite.cases
    for case in suite.cases:
        parse(case.recipe)
        assert case.backend_kind in ("eager", "inductor")
        if case.unsupported:  # a reason, never an empty verdict
            assert len(case.unsupported) > 20
    data = yaml.safe_load(path.read_text())
    groups = {c.workload.group for c in suite.cases}
    assert groups == {e["name"] for e in data["model_params"]}


def test_the_dashboard_config_gives_eager_and_torch_compile_cases():
    suite = load([DASHBOARD])
    backends = suite.config["torch_backends"]
    # torchao at dbef6992 runs every case eager and torch.compile(mode, fullgraph=True).
    assert backends["torch-inductor-max-autotune"] == {
        "kind": "inductor", "compile_mode": "max-autotune", "fullgraph": True}
    by_backend = {}
    for c in suite.cases:
        by_backend.setdefault(c.backend, []).append(c)
    assert set(by_backend) == {"torch-eager", "torch-inductor-max-autotune"}
    assert {c.backend_kind for c in by_backend["torch-inductor-max-autotune"]} == {"inductor"}
    assert {c.compile_mode for c in by_backend["torch-inductor-max-autotune"]} == {
        "max-autotune"}
    recipes = ["baseline", "int8dq", "float8dq-tensor", "float8dq-row", "float8wo"]
    assert sorted({c.recipe for c in suite.cases}) == sorted(recipes)
    # llama4 6 + deepseek_v3_236b 4 + deepseek_v3_671b 2 new (its QKVO shapes are 236b's)
    # + qwen3_32b 4 + gemma3_27b 4 + custom 4 = 24 shapes.
    shapes = {c.workload.shape for c in suite.cases}
    assert len(shapes) == 24
    assert {(16384, 8192, 5120), (128000, 7168, 7168), (16384, 5120, 640),
            (128000, 4096, 1024), (1920, 14336, 3072)} <= shapes
    assert len(suite.cases) == 24 * 5 * 2
    w = suite.workloads["linear-1920x3072x3072-bf16-cuda"]
    assert (w.device, w.memory_profiler, w.profiler, w.group) == (
        "cuda", True, False, "small_bf16_linear")
    # Its CPU copy: the same cases on the CPU, on the SKU named for the CPU where these
    # are on the one named for CUDA (the file names no SKUs).
    cpu = load([UPSTREAM / "cpu" / f"{LAST}.dashboard.microbenchmark_quantization_config.cpu.yml"])
    assert all(c.id.startswith("cuda/") for c in suite.cases)
    assert sorted("cpu-host/" + c.id.removeprefix("cuda/").replace("-cuda/", "/")
                  for c in suite.cases) == sorted(c.id for c in cpu.cases)


def test_compile_semantics_follow_the_version_of_the_key():
    # v1 (use_torch_compile, 2025-03 .. 2025-08): compiled only, or eager only.
    v1 = load([published("6b76adbedaf0")])
    by_group = {}
    for c in v1.cases:
        by_group.setdefault(c.workload.group, set()).add(c.backend)
    assert by_group == {"small_bf16_linear": {"torch-inductor-max-autotune"},
                        "large_bf16_ln_linear": {"torch-inductor-max-autotune"},
                        "cpu_fp32_linear": {"torch-eager"}}
    # v2 (no use_torch_compile; the last published version): eager and compiled, always,
    # with torch_compile_mode (default "default").
    data = yaml.safe_load(TEST_CONFIG.read_text())
    assert all("use_torch_compile" not in e for e in data["model_params"])
    assert {c.backend for c in load([TEST_CONFIG]).cases} == {"torch-eager",
                                                               "torch-inductor-max-autotune"}


def test_default_compile_mode(tmp_path):
    data = yaml.safe_load(TEST_CONFIG.read_text())
    data["model_params"] = data["model_params"][1:2]
    del data["model_params"][0]["torch_compile_mode"]
    suite = load([write_suite(tmp_path / "t.yml", data)])
    assert {c.backend for c in suite.cases} == {"torch-eager", "torch-inductor-default"}
    assert suite.config["torch_backends"]["torch-inductor-default"] == {
        "kind": "inductor", "compile_mode": "default", "fullgraph": True}


def test_transformer_block_takes_mkn_with_k_as_the_hidden_size():
    suite = load([TEST_CONFIG])
    w = suite.workloads["torchao_transformer_block-2048x4096x1024-bf16-cuda"]
    assert (w.model, w.shape, w.group) == ("torchao_transformer_block", (2048, 4096, 1024),
                                           "bf16_transformer_block")


@pytest.mark.slow
def test_transformer_block_is_torchaos_block():
    import torch
    from torchao.testing.model_architectures import create_model_and_input_data

    from workflow.models.registry import get_model

    ours = get_model("torchao_transformer_block").build("default", "f32", None, (3, 64, 7))
    theirs, x = create_model_and_input_data("transformer_block", 3, 64, 7,
                                            high_precision_dtype=torch.float32, device="cpu")
    assert ours.inputs[0].shape == x.shape == (3, 16, 64)
    theirs.load_state_dict(ours.module.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(ours.module(*ours.inputs), theirs(*ours.inputs))
    with pytest.raises(ValueError, match="multiple of it"):
        get_model("torchao_transformer_block").build("default", "f32", None, (1, 60, 8))


def test_marlin_and_sparsity_recipes_are_cases_with_reasons():
    # 3766ed7f: quantization [int4wo-32, marlin], sparsity [semi-sparse, block].
    suite = load([published("3766ed7f010f")])
    recipes = list(dict.fromkeys(c.recipe for c in suite.cases))
    # get_quantization_sparsity_recipes: block with baseline; semi-sparse with marlin
    # (int4wo-32 is not paired; baseline is paired only when listed).
    assert recipes == ["baseline", "int4wo-32", "marlin", "marlin.sparsity-semi-sparse",
                       "baseline.sparsity-block"]
    reasons = {c.recipe: c.unsupported for c in suite.cases if c.unsupported}
    assert set(reasons) == {"marlin", "marlin.sparsity-semi-sparse"}
    assert "Marlin" in reasons["marlin"] and "#3613" in reasons["marlin"]
    # baseline.sparsity-block is decided on the measuring machine (CUDA or not).
    block = [c for c in suite.cases if c.recipe == "baseline.sparsity-block"]
    assert block and all(c.unsupported is None for c in block)


def test_sparsity_names_with_a_colon(tmp_path):
    data = yaml.safe_load(TEST_CONFIG.read_text())
    data["quantization_config_recipe_names"] = ["baseline", "int8dq", "float8dq", "int8wo"]
    data["sparsity_config_recipe_names"] = ["2:4", "block"]
    suite = load([write_suite(tmp_path / "t.yml", data)])
    assert list(dict.fromkeys(c.recipe for c in suite.cases)) == [
        "baseline", "int8dq", "float8dq", "int8wo", "baseline.sparsity-2-4",
        "int8dq.sparsity-2-4", "float8dq.sparsity-2-4", "baseline.sparsity-block"]


def test_enable_memory_visualizer_is_accepted_and_recorded(tmp_path):
    suite = load([VISUALIZER])
    w = suite.workloads["linear-16384x16384x16384-bf16-cuda"]
    assert (w.memory_visualizer, w.memory_profiler) == (True, False)
    from workflow.backends.torch.characterize import write_profiles
    from workflow.backends.torch.recipes import Device

    class Prepared:
        device = Device("cpu")

    spec = {**w.spec(), "profiler": False}
    for memory_profiler, expected in ((False, "not run: enable_memory_visualizer takes effect "
                                              "with enable_memory_profiler only"),
                                      (True, "unsupported: the memory visualization renders a "
                                             "CUDA memory snapshot")):
        spec["memory_profiler"] = memory_profiler
        case = {"workload": spec, "backend": "torch-eager", "recipe": "baseline"}
        profile = write_profiles(Prepared(), case, {"artifacts_dir": str(tmp_path)}, spec)
        assert profile["memory_visualization"] is None
        assert profile["memory_visualization_status"].startswith(expected)


def test_duplicate_shapes_of_two_entries_are_two_workloads():
    # a724a37a: small_bf16_linear and large_bf16_ln_linear both have linear 1024^3;
    # torchao measures each entry apart.
    suite = load([published("a724a37ad166")])
    assert suite.workloads["linear-1024x1024x1024-bf16-cuda"].group == "small_bf16_linear"
    other = suite.workloads["linear-1024x1024x1024-bf16-cuda-large_bf16_ln_linear"]
    assert other.group == "large_bf16_ln_linear"


@pytest.mark.parametrize("path", DRAFTS, ids=lambda p: p.name)
def test_obsolete_draft_formats_are_refused_naming_key_and_spelling(path):
    with pytest.raises(ConfigError) as err:
        load([path])
    problems = err.value.problems
    assert all(p.startswith(f"{path}: ") and "\n" not in p for p in problems)
    text = "\n".join(problems)
    if path.name.endswith(".microbenchmarks.config.yml"):
        assert f"{path}: quantization: obsolete torchao key 'quantization'" in text
        assert "expected quantization_config_recipe_names" in text
        for key in ("m", "k", "n"):
            assert f"{path}: {key}: obsolete torchao key '{key}'" in text
        assert f"{path}: compile: obsolete torchao key 'compile'" in text
        assert "torch_compile_mode" in text
        assert len(problems) == 5
    else:
        assert f"{path}: quantizations: obsolete torchao key 'quantizations'" in text
        assert (f"{path}: model_params.precision: obsolete torchao key 'precision' (no "
                "published torchao runner reads it); expected high_precision_dtype") in text
        assert f"{path}: model_params.compile: obsolete torchao key 'compile'" in text
        assert f"{path}: model_params.matrix_shapes[0]: expected object, got list" in text


def test_a_oneof_failure_names_the_key_at_fault_in_one_short_line(tmp_path):
    data = yaml.safe_load(TEST_CONFIG.read_text())
    data["model_params"][2]["enable_profiler"] = "yes"
    data["model_params"][3]["matrix_shapes"][1]["name"] = "cube"
    with pytest.raises(ConfigError) as err:
        load([write_suite(tmp_path / "t.yml", data)])
    assert err.value.problems == [
        f"{tmp_path / 't.yml'}: model_params[2].enable_profiler: expected boolean, got str 'yes'",
        f"{tmp_path / 't.yml'}: model_params[3].matrix_shapes[1].name: expected one of "
        "['custom', 'llama', 'llama4', 'deepseek_v3_236b', 'deepseek_v3_671b', 'qwen3_32b', "
        "'gemma3_27b', 'pow2', 'pow2_extended', 'small_sweep', 'sweep'], got 'cube'",
    ]
    data = yaml.safe_load(TEST_CONFIG.read_text())
    data["model_params"] = 7
    with pytest.raises(ConfigError) as err:
        load([write_suite(tmp_path / "t.yml", data)])
    assert err.value.problems == [
        f"{tmp_path / 't.yml'}: model_params: expected array or object, got int 7"]


def test_the_schema_knows_every_generator():
    from workflow.suite.shapes import GENERATORS

    enum = load_schema()["$defs"]["matrix_shape"]["properties"]["name"]["enum"]
    assert set(enum) == set(GENERATORS)


# --- end to end ------------------------------------------------------------------------

# The CPU copy of torchao's test config has 210 cases; its shapes reach 65536 x 65536 x
# 65536 (a 24 GiB working set, about 20 minutes a call on 2 cores) and it cannot run here.
# The run below uses the file unchanged with `--config`-style overrides of the SKU
# measurement and of torch_batch_size (one workload per job, so that jobs can be chosen),
# and runs the job of the file's smallest workload: every recipe on torch-eager and on
# torch.compile's max-autotune, in one worker.
# A fixed count, never disturbed (tests/conftest.FAST_MEASUREMENT says why): adaptive
# torch invocations with retakes made this test 639 s on two busy pytest workers.
FAST = {"invocations": 2, "max_invocations": 2, "disturbed_share": 1.0, "repetitions": 3,
        "min_warmup_time_s": 0.05, "min_time_s": 0.01,
        "rerun_noisy": False, "torch_warmup_calls": 3, "torch_warmup_s": 0.01,
        "torch_min_run_time_s": 0.05}
E2E_WORKLOADS = ("linear-1024x1024x1024-bf16",)


@pytest.mark.e2e
def test_the_cpu_copy_of_torchaos_test_config_runs(tmp_path):
    from workflow.paths import torch_batch_dir, torch_case_record

    overlay = write_suite(tmp_path / "fast.yaml", {
        "skus": {"cpu-host": {"torch": {"threads": 2}, "measurement": FAST}},
        "torch_batch_size": 1})
    suite = load([CPU_TEST_CONFIG, overlay])
    assert len(suite.cases) == 210
    # Only the 65536^3 workload's 10 cases may be unsupported: its tensors alone need
    # ~24 GiB in bf16, recorded as unsupported on a machine with less memory (23.5 GiB here).
    assert all(c.workload.shape == (65536,) * 3 and "needs ~24.0 GiB" in c.unsupported
               for c in suite.unsupported_cases) and len(suite.unsupported_cases) in (0, 10)
    # One job per workload (torch_batch_size 1): its ten cases, both backends, every recipe.
    (key,) = [k for k, cases in suite.torch_batches.items()
              if cases[0].workload.id in E2E_WORKLOADS]
    assert len(suite.torch_batches[key]) == 5 * 2
    snakemake(tmp_path, torch_batch_dir(key), "--configfile", str(CPU_TEST_CONFIG), str(overlay))
    statuses = {}
    for case in suite.torch_batches[key]:
        record = json.loads((tmp_path / torch_case_record(torch_batch_dir(key),
                                                          case.identity())).read_text())
        statuses[record["id"]] = record["status"]
        assert record["status"] in ("ok", "unsupported"), (record["id"], record["error"])
        if record["status"] == "unsupported":
            assert record["recipe"] == "float8dq-tensor"
            assert "compute capability" in record["error"]
            continue
        assert record["timing"]["median_ms"] > 0 and record["group"] == "large_bf16_ln_linear"
        assert record["profile"]["trace"] and record["profile"]["memory_snapshot_status"]
        if record["backend"] == "torch-inductor-max-autotune":
            assert record["compile_mode"] == "max-autotune"
            assert record["graph"]["graph_breaks"] == 0
    assert sorted(statuses.values()) == ["ok"] * 8 + ["unsupported"] * 2
