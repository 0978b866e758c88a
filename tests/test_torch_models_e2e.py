"""End to end: iree-test-suites' torch_models examples (tests/data/upstream/
iree-test-suites) through the plain `snakemake results/report.json`, with a tiny MLIR of
the SDXL prompt encoder's signature placed where clip_cpu.json's URL points in the
harness's artifact layout (azure/manifest.json), beside a compstat test of our own in
the same format. A benchmark, a random-weights benchmark, a quality and a compstat test
run; the URLs without a local copy are skipped cases naming where they were looked for."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests.conftest import snakemake, write_suite
from tests.test_sharktank_upstream import write_irpa
from tests.test_torch_models import CLIP_MLIR_URL, CLIP_WEIGHTS_URL, TORCH

BASE = "https://sharkpublic.blob.core.windows.net/sharkpublic/sai/sdxl-prompt-encoder/"
# The prompt encoder's signature (encode_prompts: 4 x 1x64xi64 -> 2x64x2048xf16,
# 2x1280xf16) and one parameter of scope `model`, computing in a few microseconds.
CLIP_MLIR = """\
util.global private @bias = #flow.parameter.named<"model"::"bias"> : tensor<1x64xi64>

func.func @encode_prompts(%a: tensor<1x64xi64>, %b: tensor<1x64xi64>, %c: tensor<1x64xi64>,
                          %d: tensor<1x64xi64>) -> (tensor<2x64x2048xf16>, tensor<2x1280xf16>) {
  %bias = util.global.load @bias : tensor<1x64xi64>
  %e0 = tensor.empty() : tensor<2x64x2048xf16>
  %r0 = linalg.generic {indexing_maps = [affine_map<(i, j, k) -> (0, j)>,
                                         affine_map<(i, j, k) -> (0, j)>,
                                         affine_map<(i, j, k) -> (0, j)>,
                                         affine_map<(i, j, k) -> (0, j)>,
                                         affine_map<(i, j, k) -> (0, j)>,
                                         affine_map<(i, j, k) -> (i, j, k)>],
                        iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%a, %b, %c, %d, %bias : tensor<1x64xi64>, tensor<1x64xi64>, tensor<1x64xi64>,
                                  tensor<1x64xi64>, tensor<1x64xi64>)
      outs(%e0 : tensor<2x64x2048xf16>) {
  ^bb0(%x0: i64, %x1: i64, %x2: i64, %x3: i64, %x4: i64, %unused: f16):
    %s0 = arith.addi %x0, %x1 : i64
    %s1 = arith.addi %x2, %x3 : i64
    %s2 = arith.addi %s0, %s1 : i64
    %s3 = arith.addi %s2, %x4 : i64
    %f = arith.sitofp %s3 : i64 to f16
    linalg.yield %f : f16
  } -> tensor<2x64x2048xf16>
  %e1 = tensor.empty() : tensor<2x1280xf16>
  %r1 = linalg.generic {indexing_maps = [affine_map<(i, k) -> (0, 0)>,
                                         affine_map<(i, k) -> (i, k)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<1x64xi64>) outs(%e1 : tensor<2x1280xf16>) {
  ^bb0(%x: i64, %unused: f16):
    %f = arith.sitofp %x : i64 to f16
    linalg.yield %f : f16
  } -> tensor<2x1280xf16>
  return %r0, %r1 : tensor<2x64x2048xf16>, tensor<2x1280xf16>
}
"""
CASE = "cpu-host/iree/torch_models.{}/baseline"


def place_clip(artifacts) -> None:
    """clip_cpu.json's MLIR, weights, inputs and expected outputs, as the harness leaves
    its downloads: azure/<name> and the URL -> name manifest; and outputs off by 4 (past
    clip_cpu_quality.json's --expected_f16_threshold=1.0f) under `bad/` URLs."""
    azure = artifacts / "azure"
    azure.mkdir(parents=True)
    (azure / "model.mlir").write_text(CLIP_MLIR)
    bias = np.arange(64, dtype=np.int64).reshape(1, 64)
    write_irpa(azure / "weights.irpa", bias=bias)
    manifest = {CLIP_MLIR_URL: "model.mlir", CLIP_WEIGHTS_URL: "weights.irpa"}
    inputs = [np.arange(64, dtype=np.int64).reshape(1, 64) * (i + 1) for i in range(4)]
    for i, x in enumerate(inputs):
        x.tofile(azure / f"in{i}.bin")
        manifest[f"{BASE}inference_input.{i}.bin"] = f"in{i}.bin"
    total = sum(inputs) + bias
    outputs = [np.broadcast_to(total.reshape(1, 64, 1), (2, 64, 2048)).astype(np.float16),
               np.full((2, 1280), inputs[0][0, 0], np.float16)]
    for i, x in enumerate(outputs):
        x.tofile(azure / f"out{i}.bin")
        manifest[f"{BASE}inference_output.{i}.bin"] = f"out{i}.bin"
        (x + np.float16(4)).tofile(azure / f"bad{i}.bin")
        manifest[f"{BASE}bad/inference_output.{i}.bin"] = f"bad{i}.bin"
    (azure / "manifest.json").write_text(json.dumps(manifest, indent=2))


@pytest.fixture(scope="module")
def torch_models_run(tmp_path_factory):
    wd = tmp_path_factory.mktemp("torch_models")
    tests = wd / "torch_models"
    shutil.copytree(TORCH, tests)
    # A compstat test of the clip module, in the harness's format (upstream has none).
    (tests / "examples" / "clip_cpu_compstat.json").write_text(json.dumps({
        "type": "compstat", "markers": ["cpu", "quick"], "module": "examples/modules/clip_cpu",
        "golden_dispatch_count": 1, "golden_binary_size": 10_000_000}))
    # The quality test with expected outputs its model does not produce.
    quality = json.loads((tests / "examples" / "clip_cpu_quality.json").read_text())
    for out in quality["expected_outputs"]:
        out["url"] = out["url"].replace(BASE, f"{BASE}bad/")
    (tests / "examples" / "clip_cpu_quality_bad.json").write_text(json.dumps(quality))
    place_clip(wd / "artifacts")
    write_suite(wd / "suite.yaml", {
        "suite_name": "torch-models",
        "skus": {"cpu-host": {"iree": {"target_cpu": "host"}, "measurement": {
            "invocations": 3, "max_invocations": 3, "repetitions": 2, "min_warmup_time_s": 0.01,
            "min_time_s": 0.01, "noisy_cv": 5.0, "profile": False, "rerun_noisy": False}}},
        "torch_models": {"test_files": str(tests / "examples"), "modules": str(tests),
                         "artifacts": str(wd / "artifacts"), "markers": "cpu"}})
    snakemake(wd, "results/report.json", "results/report.md", "--configfile",
              str(wd / "suite.yaml"))
    report = json.loads((wd / "results" / "report.json").read_text())
    return wd, {c["id"]: c for c in report["cases"]}


@pytest.mark.e2e
def test_benchmark_compstat_and_quality_tests_run_unchanged(torch_models_run):
    wd, cases = torch_models_run
    bench = cases[CASE.format("clip_cpu_benchmark")]
    assert bench["status"] == "ok", bench["error"]
    assert bench["timing"]["median_ms"] > 0
    command = json.loads((wd / "results/bench_files/run/cpu-host/"
                          "torch_models.clip_cpu_benchmark/timing.json").read_text())["command"]
    assert "--function=encode_prompts" in command and "--device=local-task" in command
    assert command.count("--input=1x64xi64") == 4 and "--device_allocator=caching" in command
    assert f"--parameters=model={wd / 'artifacts' / 'azure' / 'weights.irpa'}" in command
    random = cases[CASE.format("clip_cpu_random_benchmark")]
    assert random["status"] == "ok", random["error"]
    archives = sorted((wd / "artifacts" / "torch_models" / "random_weights").glob("*.irpa"))
    assert len(archives) == 1
    compstat = cases[CASE.format("clip_cpu_compstat")]
    assert compstat["status"] == "compile-only"
    assert compstat["error"].startswith("a torch_models compstat test: compiled only")
    g = compstat["golden"]
    assert g["dispatch_golden"] == 1 and g["size_golden_bytes"] == 10_000_000
    # Its two dispatches against a golden of 1: the harness's `<=` fails, so does ours.
    assert compstat["compile"]["dispatch_count"] == 2 and g["dispatch_verdict"] == "regression"
    assert g["size_verdict"] == "pass"
    quality = cases[CASE.format("clip_cpu_quality")]
    assert quality["status"] == "ok", quality["error"]
    assert quality["provenance"]["torch_models"] == "quality"
    bad = cases[CASE.format("clip_cpu_quality_bad")]
    assert bad["status"] == "failed" and bad["stage"] == "run"
    assert bad["error"].startswith(
        "iree-run-module: outputs differ from the test's expected_outputs beyond its "
        "tolerances: [FAILED] result[0]: element at index 0 "), bad["error"]


@pytest.mark.e2e
def test_upstream_tests_without_local_files_are_skipped_naming_them(torch_models_run):
    wd, cases = torch_models_run
    unet = cases[CASE.format("scheduled_unet_benchmark_cpu")]
    assert unet["status"] == "skipped"
    url = ("https://sharkpublic.blob.core.windows.net/sharkpublic/sai/sdxl-scheduled-unet/"
           "sdxl_unet_pipeline_bench_f16.mlir")
    manifest = wd / "artifacts" / "azure" / "manifest.json"
    assert unet["error"] == (f"{url} has no local copy: {manifest} has no entry for it; "
                             "benchflow never downloads")
    md = (wd / "results" / "report.md").read_text()
    assert f"- `{CASE.format('scheduled_unet_benchmark_cpu')}`: {url} has no local copy" in md
    # Markers: the hip tests are not selected by "cpu".
    assert not any("gfx1201" in cid for cid in cases)
