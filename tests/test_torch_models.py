"""iree-test-suites' torch_models test files (tests/data/upstream/iree-test-suites, see
SOURCES.md) run unchanged: their format validated, tests chosen by pytest's -m marker
expressions, URLs found in the harness's artifact layout (never downloaded), random
weights generated into a parameter archive by content. No process is started here; the
run end to end is tests/test_torch_models_e2e.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DATA
from workflow.benchfile import random_weights, torch_models
from workflow.benchfile.flags import compile_flags, run_spec
from workflow.benchfile.markers import MarkerError, compile_expression, matches
from workflow.benchfile.parse import load_file
from workflow.benchfile.select import Selection
from workflow.benchfile.torch_plan import Planner, add_tests, goldens_of
from workflow.commands.validate import check_file
from workflow.errors import ConfigError
from workflow.suite.schema import validate_suite

TORCH = DATA / "upstream" / "iree-test-suites" / "612f936" / "torch_models"
EXAMPLES = TORCH / "examples"
CLIP_MLIR_URL = "https://sharkpublic.blob.core.windows.net/sharkpublic/sai/sdxl-prompt-encoder/model.mlir"
CLIP_WEIGHTS_URL = ("https://sharkpublic.blob.core.windows.net/sharkpublic/sai/"
                    "sdxl-prompt-encoder/real_weights.irpa")
PARAMS_MLIR = """\
util.global private @w = #flow.parameter.named<"model"::"layer.weight"> : tensor<4x4xf32>
util.global private @b = #stream.parameter.named<"model"::"layer.bias"> : tensor<4xf16>
util.global private @i = #flow.parameter.named<"ids"> : tensor<3xi64>
util.global private @k = dense<0> : tensor<2xi32>
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
"""


# --- the format: every upstream file validates, each format names the other -------------

def test_every_upstream_file_is_copied_with_its_source_and_validates():
    sources = (TORCH.parent.parent / "SOURCES.md").read_text()
    files = sorted(EXAMPLES.rglob("*.json"))
    assert len(files) == 15
    for path in files:
        assert f"`{path.relative_to(TORCH.parent.parent)}`" in sources, path
        checked = check_file(path)
        kind = "torch_module" if path.parent.name == "modules" else "torch_test"
        assert (checked.kind, checked.problems) == (kind, []), (path, checked)


def test_a_torch_models_test_given_as_a_sharktank_file_says_what_it_looks_like():
    path = EXAMPLES / "clip_cpu_benchmark.json"
    with pytest.raises(ConfigError) as exc:
        load_file(path)
    assert exc.value.problems[-1] == (
        f"{path}: it looks like an iree-test-suites torch_models test file "
        "(docs/benchmark-files.md): give it where that format is read")
    sharktank = DATA / "upstream" / "sharktank" / "612f936" / "benchmarks" / "sdxl" / \
        "clip_cpu.json"
    with pytest.raises(ConfigError) as exc:
        torch_models.load_test(sharktank)
    assert exc.value.problems[-1].endswith("it looks like a sharktank-format benchmark file "
                                           "(docs/benchmark-files.md): give it where that "
                                           "format is read")


# Malformed torch_models files and settings: (id, description, what is given: "test" a
# test file's JSON, "suite" the suite's torch_models key, the input, expected fragment).
CASES = [
    ("tm-type-unknown", "a test of type 'perf'", "test",
     {"type": "perf", "markers": [], "modules": ["m"]},
     "type: expected one of ['benchmark', 'quality', 'compstat'], got 'perf'"),
    ("tm-compstat-modules", "a compstat test with `modules` (it has one `module`)", "test",
     {"type": "compstat", "markers": [], "modules": ["m"]}, "'module' is a required"),
    ("tm-run-arg-refused", "run_args with --trace_execution (not on the allow-list)", "test",
     {"type": "benchmark", "markers": [], "modules": ["m"], "inputs": [],
      "run_args": ["--function=f", "--trace_execution"]},
     "run_args[1]: --trace_execution is not a flag benchflow passes from a torch_models"),
    ("tm-no-function", "a benchmark test without --function= in run_args", "test",
     {"type": "benchmark", "markers": [], "modules": ["m"], "inputs": []},
     "run_args: expected --function=NAME"),
    ("tm-threshold-in-benchmark", "--expected_f16_threshold in a benchmark test", "test",
     {"type": "benchmark", "markers": [], "modules": ["m"], "inputs": [],
      "run_args": ["--function=f", "--expected_f16_threshold=1.0f"]},
     "is a tolerance of a quality test's expected outputs"),
    ("tm-random-no-seed", "random weights without a seed", "test",
     {"type": "benchmark", "markers": [], "modules": ["m"], "inputs": [],
      "run_args": ["--function=f"], "weights": [{"type": "random", "scope": "model",
                                                  "module": "m"}]},
     "'seed' is a required property"),
    ("tm-input-path-value", "an input whose value is a file path", "test",
     {"type": "benchmark", "markers": [], "modules": ["m"], "run_args": ["--function=f"],
      "inputs": [{"value": "/etc/passwd"}]}, "inputs[0].value: expected a string matching"),
    ("tm-markers-unfinished", "torch_models.markers 'cpu or'", "suite", {"markers": "cpu or"},
     "torch_models.markers: marker expression 'cpu or': expected a marker name, 'not' or "
     "'(', got the end"),
    ("tm-unknown-sku", "torch_models.skus names a SKU the suite lacks", "suite",
     {"skus": ["gpu"]}, "torch_models.skus: unknown SKU 'gpu'; expected one of ['cpu-host']"),
    ("tm-modules-absent", "torch_models.modules is a directory that does not exist", "suite",
     {"modules": "/nonexistent"}, "torch_models.modules: expected a directory, /nonexistent "
     "does not exist"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_test_files_and_settings_are_refused_naming_the_key(tmp_path, case):
    _, _, kind, given, expected = case
    if kind == "suite":
        with pytest.raises(ConfigError) as exc:
            selected(suite(tmp_path, **given))
        assert any(p.startswith("s.yaml: ") and expected in p for p in exc.value.problems), \
            exc.value.problems
        return
    path = tmp_path / "t.json"
    path.write_text(json.dumps(given))
    with pytest.raises(ConfigError) as exc:
        torch_models.load_test(path)
    assert any(expected in p and p.startswith(f"{path}: ") for p in exc.value.problems), \
        exc.value.problems


# --- markers: pytest's -m -----------------------------------------------------------------

@pytest.mark.parametrize("expr, names, expected", [
    ("", {"cpu"}, True),
    ("cpu", {"cpu", "benchmark"}, True),
    ("cpu and benchmark", {"cpu", "quality"}, False),
    ("hip or cpu", {"cpu"}, True),
    ("not hip", {"cpu"}, True),
    ("not cpu and quick", {"hip", "quick"}, True),    # not binds tighter than and
    ("cpu or hip and quick", {"cpu"}, True),          # and before or
    ("(cpu or hip) and quick", {"cpu"}, False),
    ("not (cpu or hip)", {"vulkan"}, True),
    ("cpu and not random", {"cpu", "random"}, False),
])
def test_marker_expressions_select_as_pytest_m(expr, names, expected):
    assert matches(expr, names) is expected


@pytest.mark.parametrize("expr, message", [
    ("cpu and", "expected a marker name, 'not' or '(', got the end"),
    ("(cpu or hip", "expected ')', got the end"),
    ("cpu hip", "expected 'and', 'or' or the end, got 'hip'"),
    ("cpu(arg=1)", "keyword arguments of markers are not supported"),
    ("and cpu", "expected a marker name, 'not' or '(', got 'and'"),
])
def test_bad_marker_expressions_say_what_was_expected(expr, message):
    with pytest.raises(MarkerError, match=None) as exc:
        compile_expression(expr)
    assert message in str(exc.value)


# --- URLs: the harness's artifact layout, never a download -------------------------------

def test_a_url_is_its_manifest_entry_in_the_artifact_directory(tmp_path):
    path, why = torch_models.url_file(tmp_path, CLIP_MLIR_URL)
    manifest = tmp_path / "azure" / "manifest.json"
    assert path is None and why == (f"{CLIP_MLIR_URL} has no local copy: {manifest} (the "
                                    "harness's URL -> file map) does not exist; benchflow "
                                    "never downloads")
    manifest.parent.mkdir()
    manifest.write_text(json.dumps({CLIP_MLIR_URL: "0b1c.mlir"}))
    path, why = torch_models.url_file(tmp_path, CLIP_WEIGHTS_URL)
    assert path is None and why.endswith(f"{manifest} has no entry for it; benchflow never "
                                         "downloads")
    path, why = torch_models.url_file(tmp_path, CLIP_MLIR_URL)
    assert path == tmp_path / "azure" / "0b1c.mlir"
    assert why == (f"{CLIP_MLIR_URL}: expected its local copy at {path} (named in "
                   f"{manifest}), which does not exist; benchflow never downloads")
    path.write_text("module {}")
    assert torch_models.url_file(tmp_path, CLIP_MLIR_URL) == (path, None)


def test_a_manifest_entry_that_leaves_the_artifact_directory_is_refused(tmp_path):
    manifest = tmp_path / "azure" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text(json.dumps({CLIP_MLIR_URL: "../../secret.mlir"}))
    with pytest.raises(ConfigError) as exc:
        torch_models.url_file(tmp_path, CLIP_MLIR_URL)
    assert exc.value.problems == [f"{manifest}: {CLIP_MLIR_URL}: expected a file name in "
                                  f"{manifest.parent}, got '../../secret.mlir'"]


# --- selection: the suite's torch_models key ----------------------------------------------

def suite(tmp_path: Path, **spec) -> dict:
    return validate_suite({
        "skus": {"cpu-host": {"iree": {"target_cpu": "host"}}},
        "torch_models": {"test_files": str(EXAMPLES), "modules": str(TORCH),
                         "artifacts": str(tmp_path), **spec}}, "s.yaml")


def selected(config: dict) -> Selection:
    sel = Selection()
    add_tests(sel, config, "s.yaml")
    return sel


def test_markers_choose_the_tests_and_a_missing_url_file_is_a_skipped_case(tmp_path):
    sel = selected(suite(tmp_path, markers="cpu and benchmark"))
    manifest = tmp_path / "azure" / "manifest.json"
    assert sel.cases == []
    assert [(fid, sku) for fid, sku, _ in sel.skipped] == [
        ("torch_models.clip_cpu_benchmark", "cpu-host"),
        ("torch_models.clip_cpu_random_benchmark", "cpu-host"),
        ("torch_models.scheduled_unet_benchmark_cpu", "cpu-host")]
    assert sel.skipped[0][2] == (f"{CLIP_MLIR_URL} has no local copy: {manifest} (the "
                                 "harness's URL -> file map) does not exist; benchflow never "
                                 "downloads")
    # With the MLIR there, the weights are what is missing: the path it looked for.
    manifest.parent.mkdir()
    (tmp_path / "azure" / "m.mlir").write_text("module {}")
    manifest.write_text(json.dumps({CLIP_MLIR_URL: "m.mlir", CLIP_WEIGHTS_URL: "w.irpa"}))
    sel = selected(suite(tmp_path, markers="cpu and quick and benchmark and not random"))
    [(fid, _, why)] = sel.skipped
    assert fid == "torch_models.clip_cpu_benchmark"
    assert why == (f"{CLIP_WEIGHTS_URL}: expected its local copy at {tmp_path / 'azure'}/"
                   f"w.irpa (named in {manifest}), which does not exist; benchflow never "
                   "downloads")


def test_a_hip_test_is_skipped_on_a_cpu_sku_and_a_bad_marker_is_refused(tmp_path):
    sel = selected(suite(tmp_path, markers="gfx1201 and compstat"))
    [(fid, _, why)] = sel.skipped
    assert fid == "torch_models.scheduled_unet_compstat_gfx1201"
    assert why.startswith("device 'hip' does not run on a llvm-cpu SKU")
    with pytest.raises(ConfigError) as exc:
        selected(suite(tmp_path, markers="cpu and"))
    assert exc.value.problems == ["s.yaml: torch_models.markers: marker expression 'cpu "
                                  "and': expected a marker name, 'not' or '(', got the end"]


def place(tmp_path: Path) -> Path:
    """The clip MLIR and weights in the harness's layout (a manifest and its files)."""
    azure = tmp_path / "azure"
    azure.mkdir(parents=True)
    (azure / "m.mlir").write_text(PARAMS_MLIR)
    (azure / "w.irpa").write_bytes(b"\0")
    (azure / "manifest.json").write_text(json.dumps({CLIP_MLIR_URL: "m.mlir",
                                                      CLIP_WEIGHTS_URL: "w.irpa"}))
    return azure


def test_a_benchmark_test_becomes_a_benchmark_file_record(tmp_path):
    azure = place(tmp_path)
    config = suite(tmp_path, markers="quick")
    sel = selected(config)
    assert [c.id for c in sel.cases] == [
        "cpu-host/iree/torch_models.clip_cpu_benchmark/baseline",
        "cpu-host/iree/torch_models.clip_cpu_random_benchmark/baseline"]
    [(fid, _, why)] = sel.skipped  # the quality test's input files are absent
    assert fid == "torch_models.clip_cpu_quality" and "inference_input.0.bin has no " in why
    f = sel.file("torch_models.clip_cpu_benchmark")
    sku = config["skus"]["cpu-host"]
    # The module's own flags (its target) but benchflow's statistics file.
    module = json.loads((TORCH / "examples" / "modules" / "clip_cpu.json").read_text())
    assert compile_flags(f, sku) == ["--iree-input-type=auto",
                                     *module["compiler_flags"][:-2]]
    spec = run_spec(f, sku, sel.weights(f.id))
    assert (spec["function"], spec["device"], spec["inputs"]) == (
        "encode_prompts", "local-task", ["1x64xi64"] * 4)
    assert spec["benchmark_flags"] == [f"--parameters=model={azure / 'w.irpa'}",
                                       "--device_allocator=caching"]
    assert f.mlir == azure / "m.mlir" and f.input_files() == [str(azure / "w.irpa")]
    r = sel.file("torch_models.clip_cpu_random_benchmark").run_extra()["torch_models"]
    assert r["random_weights"] == [{"scope": "model", "seed": 42,
                                    "mlir": str(azure / "m.mlir")}]


def test_a_benchmark_and_a_quality_test_of_one_module_are_told_apart(tmp_path):
    """Their report rows show model, config, dtype, shape, backend, recipe, mode and
    SKU: the config is the test's name, not the module's (clip_cpu on both)."""
    from workflow.benchfile.plan import identity, skipped_plan

    place(tmp_path)
    sel = selected(suite(tmp_path, markers="quick"))
    rows = {i["workload"]: i["config"] for i in
            [identity(c) for c in sel.cases] + [s["identity"] for s in skipped_plan(sel)]}
    assert rows == {"torch_models.clip_cpu_benchmark": "clip_cpu_benchmark",
                    "torch_models.clip_cpu_random_benchmark": "clip_cpu_random_benchmark",
                    "torch_models.clip_cpu_quality": "clip_cpu_quality"}


def test_a_relative_artifact_directory_is_read_once_from_where_the_suite_is_read(
        tmp_path, monkeypatch):
    """`artifacts: downloads`: the listing found the MLIR in ./downloads, the run looked
    for it under the test file directory (<test_files>/downloads/...), which does not
    exist: every path of a case is the one the listing checked."""
    monkeypatch.chdir(tmp_path)
    azure = place(tmp_path / "downloads")
    sel = selected(suite(tmp_path, markers="quick and benchmark and not random",
                         artifacts="downloads"))
    f = sel.file("torch_models.clip_cpu_benchmark")
    assert f.not_runnable() is None
    assert f.mlir == azure / "m.mlir" and f.mlir.is_absolute() and f.mlir.is_file()
    assert f.input_files() == [str(azure / "w.irpa")]


def test_a_module_flag_off_the_allow_list_skips_its_tests_naming_it(tmp_path):
    module = TORCH / "examples" / "modules" / "scheduled_unet_gfx1201.json"
    why = torch_models.refused_flags(torch_models.load_module(module), str(module))
    assert why.startswith(f"{module}: compiler_flags[10]: --iree-preprocessing-pass-pipeline "
                          "is not a flag benchflow passes from a torch_models module file")
    azure = tmp_path / "azure"
    azure.mkdir()
    (azure / "unet.mlir").write_text("module {}")
    unet = "https://sharkpublic.blob.core.windows.net/sharkpublic/sai/sdxl-scheduled-unet/"
    (azure / "manifest.json").write_text(json.dumps({f"{unet}model.mlir": "unet.mlir"}))
    planner = Planner(Selection(), torch_models.Dirs(EXAMPLES, TORCH, TORCH, tmp_path), "r")
    assert planner.module("examples/modules/scheduled_unet_gfx1201")[2] == why
    assert planner.module("examples/modules/scheduled_unet_cpu")[2] is None


def test_goldens_are_the_harness_fields_in_benchflow_names():
    unet = json.loads((EXAMPLES / "scheduled_unet_benchmark_gfx1201.json").read_text())
    assert goldens_of(unet) == {"median_ms": 550.0, "tolerance": 1.1}
    compstat = json.loads((EXAMPLES / "scheduled_unet_compstat_cpu.json").read_text())
    assert goldens_of(compstat) == {"dispatch_count": 2158, "binary_bytes": 1541430}
    assert goldens_of({"golden_time_ms": 2.0, "tolerance_factor": 1.5}) == {
        "median_ms": 2.0, "tolerance": 1.5}


# --- random weights: iree.runtime's archive, by content -----------------------------------

def test_random_weights_are_an_archive_of_every_named_parameter(tmp_path):
    import iree.runtime as rt

    mlir = tmp_path / "m.mlir"
    mlir.write_text(PARAMS_MLIR)
    assert random_weights.parameters(mlir) == [("layer.weight", (4, 4), "f32"),
                                               ("layer.bias", (4,), "f16"), ("ids", (3,), "i64")]
    path = random_weights.archive(mlir, 42, tmp_path / "cache")
    index = rt.ParameterIndex()
    index.load(str(path))
    assert [key for key, _ in index.items()] == ["layer.weight", "layer.bias", "ids"]
    # The harness's draw: default_rng(seed), normal(0, 0.01) floats in the globals' order.
    rng = np.random.default_rng(42)
    weight = rng.normal(0.0, 0.01, size=(4, 4)).astype(np.float32)
    drawn = dict(random_weights.values(42, random_weights.parameters(mlir)))
    assert np.array_equal(drawn["layer.weight"], weight)
    assert drawn["ids"].dtype == np.int64 and drawn["layer.bias"].dtype == np.float16


def test_an_mlir_that_does_not_parse_is_a_value_error_naming_it(tmp_path):
    mlir = tmp_path / "m.mlir"
    mlir.write_text("this is not mlir")
    with pytest.raises(ValueError, match="Unable to parse module assembly: error: "):
        random_weights.parameters(mlir)


def test_random_weights_are_cached_by_seed_and_parameters(tmp_path):
    mlir = tmp_path / "m.mlir"
    mlir.write_text(PARAMS_MLIR)
    first = random_weights.archive(mlir, 42, tmp_path)
    stamp = first.stat().st_mtime_ns
    # A rerun, or the same parameters from another MLIR file: the same archive, untouched.
    other = tmp_path / "copy.mlir"
    shutil.copy(mlir, other)
    assert random_weights.archive(other, 42, tmp_path) == first
    assert first.stat().st_mtime_ns == stamp
    assert random_weights.archive(mlir, 7, tmp_path) != first
    other.write_text(PARAMS_MLIR.replace("tensor<4xf16>", "tensor<8xf16>"))
    assert random_weights.archive(other, 42, tmp_path) != first


def test_bless_writes_a_test_files_own_golden_fields(tmp_path):
    from workflow.regression.goldens import bless_benchmark_files

    compstat = tmp_path / "compstat.json"
    shutil.copy(EXAMPLES / "scheduled_unet_compstat_cpu.json", compstat)
    bench = tmp_path / "bench.json"
    shutil.copy(EXAMPLES / "clip_cpu_benchmark.json", bench)
    report = {"cases": [
        {"id": "a", "sku": "cpu-host", "status": "compile-only",
         "compile": {"dispatch_count": 2100, "binary_bytes": 1500000},
         "provenance": {"benchmark_file": str(compstat), "golden_key": "cpu-host",
                        "torch_models": "compstat"}},
        {"id": "b", "sku": "cpu-host", "status": "ok", "timing": {"median_ms": 12.5},
         "compile": {"dispatch_count": 3, "binary_bytes": 1000},
         "provenance": {"benchmark_file": str(bench), "golden_key": "cpu-host",
                        "torch_models": "benchmark"}}]}
    lines = bless_benchmark_files(report, 1, write=True)
    assert lines == [f"  {compstat}: golden_dispatch_count 2158 -> 2100",
                     f"  {compstat}: golden_binary_size 1541430 -> 1500000",
                     f"  {bench}: golden_time_ms None -> 12.5"]
    written = json.loads(compstat.read_text())
    assert (written["golden_dispatch_count"], written["golden_binary_size"]) == (2100, 1500000)
    assert torch_models.load_test(compstat) and torch_models.load_test(bench)
    assert json.loads(bench.read_text())["golden_time_ms"] == 12.5


def test_a_pipeline_loads_its_first_modules_before_its_own(tmp_path):
    unet = "https://sharkpublic.blob.core.windows.net/sharkpublic/sai/sdxl-scheduled-unet/"
    azure = tmp_path / "azure"
    azure.mkdir()
    names = {f"{unet}model.mlir": "unet.mlir", f"{unet}sdxl_unet_pipeline_bench_f16.mlir":
             "pipeline.mlir", f"{unet}real_weights.irpa": "w.irpa",
             **{f"{unet}inference_input.{i}.bin": f"in{i}.bin" for i in range(4)}}
    for name in names.values():
        (azure / name).write_text("x")
    (azure / "manifest.json").write_text(json.dumps(names))
    sel = selected(suite(tmp_path, markers="cpu and benchmark and not quick"))
    [case] = sel.cases
    assert case.benchmark == "torch_models.scheduled_unet_benchmark_cpu"
    # The test's own module is the last (scheduler_cpu), the unet is loaded first.
    assert sel.module_ids(case.benchmark) == ["torch_models-module.examples.modules."
                                              "scheduled_unet_cpu"]
    assert sel.file(case.benchmark).mlir == azure / "pipeline.mlir"
    assert sel.file(sel.module_ids(case.benchmark)[0]).mlir == azure / "unet.mlir"
    spec = run_spec(sel.file(case.benchmark), suite(tmp_path)["skus"]["cpu-host"])
    assert spec["inputs"][0] == f"1x4x128x128xf16=@{azure / 'in0.bin'}"
    assert spec["function"] == "produce_image_latents"


def test_two_test_files_of_one_id_are_refused(tmp_path):
    tests = tmp_path / "tests"
    (tests / "a").mkdir(parents=True)
    for path in (tests / "a" / "b.json", tests / "a.b.json"):
        shutil.copy(EXAMPLES / "scheduled_unet_compstat_cpu.json", path)
    with pytest.raises(ConfigError) as exc:
        selected(suite(tmp_path, test_files=str(tests)))
    assert exc.value.problems == [f"{tests / 'a.b.json'}: its id torch_models.a.b is also that "
                                  f"of {tests / 'a' / 'b.json'}; expected one test file per id "
                                  "(rename one of the two)"]
