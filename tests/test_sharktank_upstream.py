"""IREE's own sharktank benchmark files (tests/data/upstream/sharktank, see SOURCES.md)
run unchanged: found as iree-test-suites' runner finds their MLIR, weights, inputs and
modules; every (file, SKU) pair a case that runs or is skipped with its reason; judged
by the file's own rules where benchflow follows them."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import DATA, snakemake, write_suite
from workflow.benchfile.flags import data_files, run_spec
from workflow.benchfile.parse import file_problems, load_file
from workflow.benchfile.resolve import ARTIFACTS_ENV, EXTERNAL_ENV, Locations
from workflow.benchfile.select import Availability, Selection, select
from workflow.commands.report import collect_cases
from workflow.planning.plan import bench_provenance, bench_skipped_plan
from workflow.records.report import build_report, validate_report
from workflow.regression.gate import golden_section
from workflow.render import html, markdown
from workflow.suite.load import load
from workflow.suite.schema import validate_suite

UPSTREAM = DATA / "upstream" / "sharktank"
CURRENT = UPSTREAM / "612f936" / "benchmarks"      # iree-test-suites main: every current file
PRE_MOVE = UPSTREAM / "31b131f" / "benchmarks"     # main before the files moved to IREE
LLAMA_PR = UPSTREAM / "98f8cf1" / "benchmarks"     # refs/pull/111: mlir_url, absolute @inputs
IREE_REPO = UPSTREAM / "iree-1208149" / "benchmarks"  # iree-org/iree: mlir_file_name
CLIP = "cpu-host/iree/sdxl.clip_cpu/baseline"
CLIP_ROCM = "cpu-host/iree/sdxl.clip_rocm/baseline"
NO_ENV = {ARTIFACTS_ENV: "", EXTERNAL_ENV: ""}

# A tiny stand-in for the SDXL prompt encoder, with the signature clip_cpu.json names
# (function_run encode_prompts, inputs 4 x 1x64xi64) and a parameter from the weights
# the runner always passes (<artifacts>/sdxl_clip/real_weights.irpa).
CLIP_MLIR = """\
util.global private @bias = #flow.parameter.named<"model"::"bias"> : tensor<1x64xi64>

func.func @encode_prompts(%a: tensor<1x64xi64>, %b: tensor<1x64xi64>, %c: tensor<1x64xi64>,
                          %d: tensor<1x64xi64>) -> tensor<1x64xi64> {
  %bias = util.global.load @bias : tensor<1x64xi64>
  %e = tensor.empty() : tensor<1x64xi64>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %b, %c, %d, %bias : tensor<1x64xi64>, tensor<1x64xi64>, tensor<1x64xi64>,
                                  tensor<1x64xi64>, tensor<1x64xi64>)
      outs(%e : tensor<1x64xi64>) {
  ^bb0(%x0: i64, %x1: i64, %x2: i64, %x3: i64, %x4: i64, %unused: i64):
    %s0 = arith.addi %x0, %x1 : i64
    %s1 = arith.addi %x2, %x3 : i64
    %s2 = arith.addi %s0, %s1 : i64
    %s3 = arith.addi %s2, %x4 : i64
    linalg.yield %s3 : i64
  } -> tensor<1x64xi64>
  return %r : tensor<1x64xi64>
}
"""


def write_irpa(path: Path, **arrays) -> Path:
    """A parameter archive as IREE's tools read it (iree.runtime.ParameterIndex)."""
    import iree.runtime as rt

    index = rt.ParameterIndex()
    for name, array in arrays.items():
        index.add_buffer(name, array.tobytes())
    path.parent.mkdir(parents=True, exist_ok=True)
    index.create_archive_file(str(path))
    return path


def place_clip_artifacts(artifacts: Path) -> None:
    """What a user who downloaded the SDXL CLIP artifacts has, under upstream's names."""
    import numpy as np

    group = artifacts / "sdxl_clip"
    group.mkdir(parents=True, exist_ok=True)
    (group / "model.mlir").write_text(CLIP_MLIR)
    write_irpa(group / "real_weights.irpa", bias=np.arange(64, dtype=np.int64))


def upstream_files() -> list[Path]:
    return sorted(UPSTREAM.glob("*/benchmarks/*/*.json"))


def suite_config(root: Path, **spec) -> dict:
    return validate_suite({
        "suite_name": "upstream",
        "skus": {"cpu-host": {"iree": {"target_cpu": "host"}},
                 "cpu-generic": {"iree": {"target_cpu": "generic", "device": "local-sync"}}},
        "benchmark_files": {"dir": str(root), "models": ["*"], "backends": [],
                            "golden_keys": {"cpu-host": "cpu", "cpu-generic": "cpu"}, **spec},
    }, "s.yaml")


def where(root: Path, env=None, **spec) -> Locations:
    return Locations.of(spec, root, env=env if env is not None else {})


# --- the copied files --------------------------------------------------------------------

def test_every_upstream_file_is_copied_with_its_source_and_validates():
    sources = (UPSTREAM / "SOURCES.md").read_text()
    files = upstream_files()
    assert len(files) == 16
    for path in files:
        snapshot = path.relative_to(UPSTREAM).parts[0]
        assert f"`{snapshot}/`" in sources and path.name in sources
        assert file_problems(json.loads(path.read_text()), str(path)) == []
    assert {p.name for p in CURRENT.glob("*/*.json")} == {"clip_cpu.json", "clip_rocm.json"}


# --- where files are found (model_benchmark_run.py, conftest.py) --------------------------

def test_mlir_file_path_is_relative_to_the_benchmarks_root_not_the_json():
    f = load_file(PRE_MOVE / "sdxl" / "e2e_rocm.json", where=where(PRE_MOVE))
    assert f.data["mlir_file_path"] == "external_test_files/sdxl_pipeline_bench_f16.mlir"
    assert f.mlir == PRE_MOVE / "external_test_files" / "sdxl_pipeline_bench_f16.mlir"
    why = f.not_runnable()
    assert why.startswith(f"its MLIR is absent: expected {f.mlir} (mlir_file_path "
                          "'external_test_files/sdxl_pipeline_bench_f16.mlir' is relative "
                          f"to the benchmarks root {PRE_MOVE})")
    assert why.endswith("benchflow never downloads")


def test_mlir_file_name_is_a_file_of_the_external_test_files_directory(tmp_path):
    path = IREE_REPO / "sdxl" / "e2e_rocm.json"
    f = load_file(path, where=where(IREE_REPO))
    assert f.mlir is None
    assert f.not_runnable() == (
        "its MLIR cannot be located: mlir_file_name 'sdxl_pipeline_bench_f16.mlir' is a file "
        "of the external test files directory: set benchmark_files.external_files_dir or "
        "$PATH_TO_EXTERNAL_FILES")
    ext = tmp_path / "test_suite_files"
    f = load_file(path, where=where(IREE_REPO, external_files_dir=str(ext)))
    assert f.mlir == ext / "sdxl_pipeline_bench_f16.mlir"
    # The runner's README passes the directory as $PATH_TO_EXTERNAL_FILES.
    f = load_file(path, where=where(IREE_REPO, env={EXTERNAL_ENV: str(ext)}))
    assert f.mlir == ext / "sdxl_pipeline_bench_f16.mlir"
    assert "($PATH_TO_EXTERNAL_FILES)" in f.not_runnable()


def test_current_files_find_mlir_and_weights_in_the_artifact_directory(tmp_path):
    path = CURRENT / "sdxl" / "clip_cpu.json"
    # The runner's default: <benchmarks root>/../artifacts/<model>_<submodel>/.
    f = load_file(path, where=where(CURRENT))
    assert f.group == "sdxl_clip"
    assert f.mlir == CURRENT.parent / "artifacts" / "sdxl_clip" / "model.mlir"
    # $IREE_TEST_FILES/artifacts, as the runner's artifacts_dir.
    f = load_file(path, where=where(CURRENT, env={ARTIFACTS_ENV: str(tmp_path / "itf")}))
    assert f.mlir == tmp_path / "itf" / "artifacts" / "sdxl_clip" / "model.mlir"
    assert "<artifacts> is $IREE_TEST_FILES/artifacts" in f.not_runnable()
    # The suite's artifacts_dir wins over the variable.
    art = tmp_path / "downloads"
    f = load_file(path, where=where(CURRENT, env={ARTIFACTS_ENV: str(tmp_path / "itf")},
                                    artifacts_dir=str(art)))
    assert f.mlir == art / "sdxl_clip" / "model.mlir"
    assert "<artifacts> is benchmark_files.artifacts_dir" in f.not_runnable()
    # The runner always passes <group>/real_weights.irpa; benchflow passes it when present.
    assert f.weights is None and run_spec(f, suite_config(CURRENT)["skus"]["cpu-host"])[
        "parameters"] == []
    place_clip_artifacts(art)
    assert f.not_runnable() is None
    assert f.weights == art / "sdxl_clip" / "real_weights.irpa"
    assert data_files(f) == [str(art / "sdxl_clip" / "real_weights.irpa")]


def test_mlir_url_and_quality_tests_name_the_downloaded_mlir(tmp_path):
    f = load_file(LLAMA_PR / "llama" / "8b-fp16-decode_rocm.json", where=where(LLAMA_PR))
    # FetchedArtifact(group=<model>_<submodel>, url): the URL's file name in the group.
    assert f.mlir == (LLAMA_PR.parent / "artifacts" / "llama_8b-fp16-decode" /
                      "llama_8b_fp16_2025-09-20.mlir")
    # A checkout's quality test of the same benchmark says which MLIR it downloads.
    root = tmp_path / "sharktank_models" / "benchmarks"
    shutil.copytree(CURRENT, root)
    quality = tmp_path / "sharktank_models" / "quality_tests" / "sdxl" / "clip_cpu.json"
    quality.parent.mkdir(parents=True)
    quality.write_text(json.dumps({"mlir": "https://example.invalid/sdxl-prompt-encoder/"
                                           "prompt_encoder.mlir"}))
    f = load_file(root / "sdxl" / "clip_cpu.json", where=where(root))
    assert f.mlir == tmp_path / "sharktank_models" / "artifacts" / "sdxl_clip" / \
        "prompt_encoder.mlir"


def test_named_weights_are_in_the_group_and_required(tmp_path):
    art = tmp_path / "artifacts"
    f = load_file(PRE_MOVE / "sdxl" / "punet_int8_fp16_rocm.json",
                  where=where(PRE_MOVE, artifacts_dir=str(art)))
    assert f.weights == art / "sdxl_punet_int8_fp16" / "punet_weights.irpa"
    (art / "sdxl_punet_int8_fp16").mkdir(parents=True)
    (art / "sdxl_punet_int8_fp16" / "model.mlir").write_text("// placeholder\n")
    assert f.not_runnable().startswith(f"its weights file is absent: expected {f.weights} "
                                       "(its real_weights_file_name, in <artifacts>/"
                                       "sdxl_punet_int8_fp16/ where <artifacts> is "
                                       "benchmark_files.artifacts_dir")


def test_real_weights_file_path_is_relative_to_the_benchmarks_root(tmp_path):
    data = json.loads((CURRENT / "sdxl" / "clip_cpu.json").read_text())
    path = tmp_path / "benchmarks" / "sdxl" / "clip_cpu.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**data, "real_weights_file_path": "w/clip.irpa",
                                "real_weights_file_name": "ignored.irpa"}))
    assert load_file(path).weights == tmp_path / "benchmarks" / "w" / "clip.irpa"


def test_absent_input_files_skip_a_file(tmp_path):
    art = tmp_path / "artifacts"
    f = load_file(LLAMA_PR / "llama" / "8b-fp16-decode_rocm.json",
                  where=where(LLAMA_PR, artifacts_dir=str(art)))
    f.mlir.parent.mkdir(parents=True)
    f.mlir.write_text("// placeholder\n")
    assert f.not_runnable() == (
        "its input inputs[0] is absent: expected /shark-dev/data/llama3.1/weights/8b/"
        "decode_args_bs4_128_stride_32/next_tokens.npy (benchflow never downloads)")


def test_modules_name_other_benchmarks_by_model_and_submodel(tmp_path):
    root = tmp_path / "benchmarks"
    shutil.copytree(PRE_MOVE, root)
    art = tmp_path / "artifacts"
    loc = where(root, artifacts_dir=str(art))
    pipeline = (root / "external_test_files" / "sdxl_pipeline_bench_f16.mlir")
    pipeline.parent.mkdir()
    pipeline.write_text("// placeholder\n")
    for group in ("sdxl_clip", "sdxl_vae"):
        (art / group).mkdir(parents=True)
        (art / group / "model.mlir").write_text("// placeholder\n")
    write_irpa(art / "sdxl_clip" / "real_weights.irpa")
    sel = Selection()
    e2e = load_file(root / "sdxl" / "e2e_rocm.json", where=loc)
    sel.files[e2e.id] = e2e
    avail = Availability(sel, loc)
    # modules: [sdxl_clip, sdxl_unet_fp16, sdxl_vae] are sdxl/<submodel>_rocm.json.
    assert avail.unavailable(e2e.id) == (
        f"modules[1] 'sdxl_unet_fp16' ({root / 'sdxl' / 'unet_fp16_rocm.json'}) cannot run: "
        f"its MLIR is absent: expected {art / 'sdxl_unet_fp16' / 'model.mlir'} (it names no "
        "MLIR, so the one upstream's quality tests download, in <artifacts>/sdxl_unet_fp16/ "
        "where <artifacts> is benchmark_files.artifacts_dir; set benchmark_files.artifacts_dir"
        " or $IREE_TEST_FILES to point elsewhere); benchflow never downloads")
    (art / "sdxl_unet_fp16").mkdir()
    (art / "sdxl_unet_fp16" / "model.mlir").write_text("// placeholder\n")
    sel = Selection(files={e2e.id: e2e})
    avail = Availability(sel, loc)
    assert avail.unavailable(e2e.id) is None
    assert sel.module_ids(e2e.id) == ["sdxl.clip_rocm", "sdxl.unet_fp16_rocm", "sdxl.vae_rocm"]
    # As the runner: each module's weights (where they are), none of the pipeline's own.
    assert sel.weights(e2e.id) == [art / "sdxl_clip" / "real_weights.irpa"]
    assert sel.file("sdxl.vae_rocm").where == loc
    # The compiled_file_name is the runner's output name: recorded, not used.
    sel.cases = []
    prov = bench_provenance(sel, "cpu-host", e2e.id)
    assert prov["compiled_file_name"] == "sdxl_full_pipeline_fp16_rocm"
    assert prov["mlir_file"] == str(pipeline)


def test_every_selected_pair_is_a_case_or_skipped_with_its_reason(tmp_path):
    for root in sorted(UPSTREAM.glob("*/benchmarks")):
        config = suite_config(root, artifacts_dir=str(tmp_path / "none"))
        sel = select(config, "s.yaml", env=NO_ENV)
        files = sorted(root.glob("*/*.json"))
        assert len(sel.cases) == 0 and len(sel.skipped) == 2 * len(files)
        for fid, _sku, why in sel.skipped:
            f = sel.file(fid)
            if f.data["device"] == "hip":
                assert why == ("device 'hip' does not run on a llvm-cpu SKU (expected one of "
                               "['local-task', 'local-sync'])")
            else:
                assert why.startswith("its MLIR is absent: expected ")
    art = tmp_path / "artifacts"
    place_clip_artifacts(art)
    sel = select(suite_config(CURRENT, artifacts_dir=str(art)), "s.yaml", env=NO_ENV)
    assert sorted(c.id for c in sel.cases) == ["cpu-generic/iree/sdxl.clip_cpu/baseline", CLIP]
    assert [(f, s) for f, s, _ in sel.skipped] == [("sdxl.clip_rocm", "cpu-host"),
                                                    ("sdxl.clip_rocm", "cpu-generic")]
    assert sel.weights("sdxl.clip_cpu") == [art / "sdxl_clip" / "real_weights.irpa"]


# --- a suite of benchmark files only -----------------------------------------------------

def test_a_suite_may_consist_of_benchmark_files_only(tmp_path):
    path = write_suite(tmp_path / "s.yaml", {
        "skus": {"cpu-host": {"iree": {"target_cpu": "host"}}},
        "benchmark_files": {"dir": str(CURRENT), "models": ["sdxl"]}})
    suite = load([path])
    assert suite.cases == [] and suite.workloads == {}
    with pytest.raises(Exception, match="expected at least one workload"):
        load([write_suite(tmp_path / "t.yaml", {"skus": {"h": {}}})])


# --- skipped cases in the report ---------------------------------------------------------

def report_of(sel: Selection) -> dict:
    cases = collect_cases([], [], [], skipped=bench_skipped_plan(sel))
    report = build_report(cases, suite_name="upstream", config_hash="x", config_source="s")
    validate_report(report)
    return report


@pytest.mark.tool
def test_skipped_pairs_are_recorded_with_their_reasons_and_rendered(tmp_path):
    sel = select(suite_config(CURRENT, artifacts_dir=str(tmp_path / "art")), "s.yaml",
                 env=NO_ENV)
    report = report_of(sel)
    by_id = {c["id"]: c for c in report["cases"]}
    assert set(by_id) == {CLIP, CLIP_ROCM, "cpu-generic/iree/sdxl.clip_cpu/baseline",
                          "cpu-generic/iree/sdxl.clip_rocm/baseline"}
    clip = by_id[CLIP]
    assert clip["status"] == "skipped" and clip["stage"] is None
    assert clip["error"].startswith(f"its MLIR is absent: expected {tmp_path / 'art'}")
    assert clip["provenance"]["benchmark_file"] == str(CURRENT / "sdxl" / "clip_cpu.json")
    assert (clip["workload"], clip["config"], clip["dtype"], clip["shape"]) == (
        "sdxl.clip_cpu", "clip", "i64", [1, 64])
    md = markdown.render(report)
    assert "### Skipped (4)" in md and "4 cases: 0 ✅ ok, 4 ⏭ skipped." in md
    assert f"- `{CLIP_ROCM}`: device 'hip' does not run on a llvm-cpu SKU" in md
    assert f"- `{CLIP}`: its MLIR is absent: expected {tmp_path / 'art'}" in md
    page = html.render(report)
    assert "<h3>Skipped (4)</h3>" in page
    assert f"<li><code>{CLIP_ROCM}</code>: device &#x27;hip&#x27; does not run" in page


def test_a_skipped_case_is_not_judged_against_its_files_goldens():
    f = load_file(CURRENT / "sdxl" / "clip_cpu.json")
    case = {"id": CLIP, "status": "skipped", "stage": None, "error": "its MLIR is absent"}
    g = golden_section(case, None, {}, f.goldens("cpu"), str(f.path))
    assert (g["verdict"], g["dispatch_verdict"], g["size_verdict"]) == ("no-golden",) * 3
    assert g["reason"] == "case skipped: not judged (its MLIR is absent)"


# --- goldens by the file's own rules -----------------------------------------------------

def ok_case(size: int, dispatches: int, medians: list[float]) -> dict:
    return {"id": CLIP, "status": "ok", "stage": None,
            "compile": {"binary_bytes": size, "dispatch_count": dispatches},
            "timing": {"invocation_medians_ms": medians, "noisy": False}}


def test_a_files_golden_size_is_a_ceiling_as_sharktank_checks_it(tmp_path):
    f = load_file(CURRENT / "sdxl" / "clip_cpu.json")
    goldens = f.goldens("cpu")
    assert goldens == {"median_ms": 2755.0, "tolerance": 1.1, "dispatch_count": 2130,
                       "binary_bytes": 540000}
    gate = {"size_tolerance": 1.05}
    # sharktank: binary size <= golden_size; one byte more regresses.
    g = golden_section(ok_case(540001, 2130, [2755.0] * 5), None, gate, goldens, str(f.path))
    assert g["size_verdict"] == "regression" and g["size_tolerance"] == 1.0
    assert g["size_rule"] == "sharktank: binary size <= golden_size"
    assert g["dispatch_rule"] == "sharktank: dispatch count <= golden_dispatch"
    assert g["dispatch_verdict"] == "pass"
    assert golden_section(ok_case(540000, 2131, [2755.0] * 5), None, gate, goldens,
                          str(f.path))["dispatch_verdict"] == "regression"
    # The time stays benchflow's statistical test, and says so (and what sharktank does).
    assert g["time_rule"].startswith("benchflow: regression when median / golden > x1.1 and "
                                     "the exact Wilcoxon signed-rank test")
    assert "sharktank's own: one invocation's mean <= golden_time_ms x 1.1, retried" in \
        g["time_rule"]
    # The same case against a benchflow golden file: benchflow's size rule, +5 %.
    gfile = tmp_path / "cpu-host.json"
    gfile.write_text(json.dumps({
        "kind": "benchflow-goldens", "schema_version": "1.0", "sku": "cpu-host",
        "cases": {CLIP: {"median_ms": 2755.0, "invocation_medians_ms": [2755.0] * 5,
                         "cv": 0.0, "dispatch_count": 2130, "binary_bytes": 540000,
                         "taken_at": "2026-01-01T00:00:00+00:00", "git_sha": "x"}}}))
    g = golden_section(ok_case(540001, 2130, [2755.0] * 5), gfile, gate, goldens, str(f.path))
    assert g["size_verdict"] == "pass" and g["size_tolerance"] == 1.05
    assert g["size_rule"] == "benchflow: binary size <= golden x 1.05"
    assert g["time_rule"].startswith("benchflow: ") and "Mann-Whitney" in g["time_rule"]


# --- end to end: the current upstream suite, unchanged -----------------------------------

@pytest.fixture(scope="module")
def upstream_run(tmp_path_factory):
    """`snakemake results/report.json` on a suite of only iree-test-suites' current files,
    first without any artifact, then with a small MLIR and weights under clip_cpu.json's
    upstream names. Yields the work directory and both reports."""
    wd = tmp_path_factory.mktemp("upstream")
    # A fixed 5 invocations (max_invocations): the exact Wilcoxon test's fewest for a
    # verdict; adaptive looks would take 8 to 24 of the file's 3-s warm-ups.
    measurement = {"invocations": 5, "max_invocations": 5, "repetitions": 3,
                   "min_warmup_time_s": 0.05,
                   "min_time_s": 0.01, "noisy_cv": 5.0}
    write_suite(wd / "suite.yaml", {
        "suite_name": "sharktank-upstream",
        "skus": {"cpu-host": {"iree": {"target_cpu": "host"}, "measurement": measurement}},
        "benchmark_files": {"dir": str(CURRENT), "models": ["*"], "backends": [],
                            "golden_keys": {"cpu-host": "cpu"},
                            "artifacts_dir": str(wd / "artifacts")},
    })
    env = {k: v for k, v in os.environ.items() if k not in (ARTIFACTS_ENV, EXTERNAL_ENV)}

    def run():
        snakemake(wd, "results/report.json", "results/report.md", "--configfile",
                  str(wd / "suite.yaml"), env=env)
        return json.loads((wd / "results" / "report.json").read_text())

    before = run()
    md_before = (wd / "results" / "report.md").read_text()
    place_clip_artifacts(wd / "artifacts")
    after = run()
    return wd, before, md_before, after


@pytest.mark.e2e
def test_upstream_files_without_artifacts_are_all_skipped_cases(upstream_run):
    wd, before, md, _ = upstream_run
    by_id = {c["id"]: c for c in before["cases"]}
    assert set(by_id) == {CLIP, CLIP_ROCM}  # each (file, SKU) a case, none missing
    assert all(c["status"] == "skipped" for c in by_id.values())
    expected = wd / "artifacts" / "sdxl_clip" / "model.mlir"
    assert by_id[CLIP]["error"].startswith(f"its MLIR is absent: expected {expected}")
    assert by_id[CLIP_ROCM]["error"].startswith("device 'hip' does not run on a llvm-cpu SKU")
    assert f"- `{CLIP}`: its MLIR is absent: expected {expected}" in md
    assert f"- `{CLIP_ROCM}`: device 'hip' does not run" in md


@pytest.mark.e2e
def test_clip_cpu_runs_unchanged_and_is_judged_by_its_cpu_goldens(upstream_run):
    wd, _, _, after = upstream_run
    by_id = {c["id"]: c for c in after["cases"]}
    assert set(by_id) == {CLIP, CLIP_ROCM} and by_id[CLIP_ROCM]["status"] == "skipped"
    clip = by_id[CLIP]
    assert clip["status"] == "ok", clip["error"]
    # The file's own function, inputs, flags, repetitions and warm-up, the weights from
    # the artifact group.
    command = json.loads((wd / "results/bench_files/run/cpu-host/sdxl.clip_cpu/timing.json")
                         .read_text())["command"]
    assert "--function=encode_prompts" in command
    assert command.count("--input=1x64xi64") == 4 and "--device_allocator=caching" in command
    assert f"--parameters=model={wd / 'artifacts' / 'sdxl_clip' / 'real_weights.irpa'}" in \
        command
    assert "--benchmark_repetitions=10" in command and \
        "--benchmark_min_warmup_time=3" in command
    assert clip["timing"]["repetitions"] == 10 and clip["compile"]["dispatch_count"] == 1
    assert clip["provenance"]["golden_key"] == "cpu"
    # Judged against golden_*["cpu"] with the file's rules.
    g = clip["golden"]
    assert g["source"] == str(CURRENT / "sdxl" / "clip_cpu.json")
    assert (g["value_ms"], g["tolerance"], g["dispatch_golden"], g["size_golden_bytes"]) == (
        2755.0, 1.1, 2130, 540000)
    assert g["dispatch_verdict"] == "improvement" and g["size_verdict"] == "pass"
    assert g["size_rule"] == "sharktank: binary size <= golden_size"
    # A few microseconds against 2.755 s: faster beyond any noise, 5 invocations reach p.
    assert g["verdict"] == "improvement" and g["test"] == "wilcoxon-signed-rank-exact"
    assert g["time_rule"].startswith("benchflow: ")
