"""IREE GPU targets (issue 16): SKUs for cuda, rocm and vulkan-spirv compile on any
machine; where their device is absent the case is `compile-only`: compiled (dispatch
count, binary size, compile seconds, judged against their goldens), not run, with the
reason, visible as its own status in every report, never failed nor dropped.

The compile-only chain is exercised through the stage functions (compile_module, the
benchmark-file run stage that finds no device, the case step) and records (report,
bless, check), not through Snakemake: the IREE job that produces no-device run and
verify results for suite cases is another stage's (it calls device_absent_reason)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import write_suite
from tests.test_sharktank_upstream import CLIP_MLIR, CURRENT, NO_ENV, write_irpa
from workflow.backends.iree import tools
from workflow.benchfile.flags import compile_flags as bench_compile_flags
from workflow.benchfile.flags import run_spec
from workflow.benchfile.select import select
from workflow.cli.main import main
from workflow.errors import ConfigError
from workflow.jobs.cases import case_benchmark_file
from workflow.jobs.iree import compile_module
from workflow.jobs.sharktank import run_benchmark_file
from workflow.planning.plan import bench_identity, bench_provenance
from workflow.records.case import assemble
from workflow.records.report import build_report, validate_report
from workflow.records.stage import NO_DEVICE, StageResult
from workflow.regression import gate
from workflow.regression.gate import golden_section
from workflow.render import common, coverage, csv_report, dashboard, html, markdown
from workflow.stats.enums import Status
from workflow.suite.load import load
from workflow.suite.schema import validate_suite

COMPILE_ONLY = Status.COMPILE_ONLY
W = [{"model": "linear", "shapes": [[4, 8, 8]]}]
CUDA = {"iree": {"target_backend": "cuda", "target_chip": "sm_80", "device": "cuda"}}
ROCM = {"iree": {"target_backend": "rocm", "target_chip": "gfx942", "device": "hip"}}
VULKAN = {"iree": {"target_backend": "vulkan-spirv", "target_chip": "ampere",
                   "device": "vulkan"}}
REASON = "no cuda device here: iree.runtime's cuda driver lists no device"


@pytest.fixture(autouse=True)
def chip_cache(tmp_path, monkeypatch) -> Path:
    """Every test's own chip cache: a test never reads another's answers."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(tools.CACHE_ENV, str(cache))
    return cache


def sku_of(**iree) -> dict:
    return validate_suite({"skus": {"s": {"iree": iree}}, "workloads": W}, "s.yaml")["skus"]["s"]


# --- flags per backend ---------------------------------------------------------------------

@pytest.mark.tool
def test_compile_flags_per_target_backend():
    assert tools.compile_flags(sku_of(target_cpu="generic")) == [
        "--iree-input-type=torch", "--iree-hal-target-device=local",
        "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=generic"]
    assert tools.compile_flags(sku_of(**CUDA["iree"], compile_flags=["--iree-opt-level=O3"]),
                               input_type="auto") == [
        "--iree-input-type=auto", "--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80",
        "--iree-opt-level=O3"]
    assert tools.target_flags(ROCM["iree"]) == ["--iree-hal-target-device=hip",
                                                 "--iree-rocm-target=gfx942"]
    assert tools.target_flags(VULKAN["iree"]) == ["--iree-hal-target-device=vulkan",
                                                   "--iree-vulkan-target=ampere"]
    # The runtime device each backend's code runs on.
    assert {b: t.devices for b, t in tools.TARGETS.items()} == {
        "llvm-cpu": ("local-task", "local-sync"), "cuda": ("cuda",), "rocm": ("hip",),
        "vulkan-spirv": ("vulkan",)}
    assert tools.device_flags(CUDA) == ["--device=cuda"]


@pytest.mark.tool
def test_the_flags_are_the_installed_compilers():
    """The flag names as this iree-compile spells them (3.x: --iree-rocm-target, not
    --iree-hip-target), and the backends it has registered."""
    import subprocess

    tool = tools.tool_path("iree-compile")
    help_text = subprocess.run([tool, "--help-list-hidden"], capture_output=True, text=True,
                               timeout=60).stdout
    for target in tools.TARGETS.values():
        for flag in ([target.chip_flag] if target.chip_flag else
                     ["--iree-hal-local-target-device-backends", "--iree-llvmcpu-target-cpu"]):
            assert f"  {flag}=" in help_text, flag
    assert "  --iree-hal-target-device=" in help_text
    backends = subprocess.run([tool, "--iree-hal-list-target-backends"], capture_output=True,
                              text=True, timeout=60).stdout.split()
    assert set(tools.TARGETS) <= set(backends)


# --- validated at load ---------------------------------------------------------------------

def suite_file(tmp_path: Path, **skus) -> Path:
    return write_suite(tmp_path / "s.yaml", {"skus": skus, "workloads": W})


@pytest.mark.tool
def test_a_gpu_sku_with_a_chip_the_compiler_knows_loads(tmp_path):
    suite = load([suite_file(tmp_path, cuda=CUDA, rocm=ROCM, vulkan=VULKAN,
                             cpu={"iree": {"target_cpu": "host"}})])
    assert suite.sku("cuda")["iree"]["target_chip"] == "sm_80"
    assert suite.sku("cpu")["iree"]["target_chip"] is None
    # GPU SKUs plan IREE cases like any other: compiled here, run where the device is.
    assert {c.sku for c in suite.iree_cases} == {"cuda", "rocm", "vulkan", "cpu"}


@pytest.mark.tool
@pytest.mark.parametrize(("iree", "problem"), [
    ({"target_backend": "cuda", "target_chip": "sm_7000", "device": "cuda"},
     "skus.gpu.iree.target_chip: iree-compile {v} does not compile for 'sm_7000' "
     "(--iree-cuda-target=sm_7000: missing GPU target in #hal.executable.target); expected "
     "a cuda chip it knows, e.g. sm_80"),
    ({"target_backend": "rocm", "target_chip": "gfx9999", "device": "hip"},
     "skus.gpu.iree.target_chip: iree-compile {v} does not compile for 'gfx9999' "
     "(--iree-rocm-target=gfx9999: Unknown ROCM target 'gfx9999'); expected a rocm chip it "
     "knows, e.g. gfx942"),
    ({"target_backend": "vulkan-spirv", "target_chip": "nope", "device": "vulkan"},
     "skus.gpu.iree.target_chip: iree-compile {v} does not compile for 'nope' "
     "(--iree-vulkan-target=nope: Unknown Vulkan target 'nope')"),
    ({"target_backend": "cuda", "target_chip": "sm_80"},
     "skus.gpu.iree.device: 'local-task' does not run cuda code; expected cuda for "
     "target_backend 'cuda' (set iree.device)"),
    ({"target_backend": "rocm", "target_chip": "gfx942", "device": "local-sync"},
     "skus.gpu.iree.device: 'local-sync' does not run rocm code; expected hip"),
    ({"target_backend": "rocm", "device": "hip"},
     "skus.gpu.iree.target_chip: required for target_backend 'rocm'; expected a chip "
     "iree-compile knows, e.g. gfx942"),
    ({"target_chip": "sm_80"},
     "skus.gpu.iree.target_chip: target_backend 'llvm-cpu' takes target_cpu, not a chip; "
     "expected null, got 'sm_80'"),
    ({"device": "hip"},
     "skus.gpu.iree.device: 'hip' does not run llvm-cpu code; expected local-task or "
     "local-sync"),
], ids=["cuda-chip", "rocm-chip", "vulkan-chip", "cuda-on-local-task", "rocm-on-local-sync",
        "no-chip", "chip-on-cpu", "hip-on-cpu"])
def test_a_bad_gpu_sku_is_a_load_error_naming_the_file_sku_and_key(tmp_path, iree, problem):
    path = suite_file(tmp_path, gpu={"iree": iree})
    with pytest.raises(ConfigError) as err:
        load([path])
    assert len(err.value.problems) == 1, err.value.problems
    assert err.value.problems[0].startswith(f"{path}: "
                                            + problem.format(v=tools.compiler_version()))


@pytest.mark.tool
def test_a_bad_chip_is_reported_with_every_other_problem(tmp_path):
    path = write_suite(tmp_path / "s.yaml", {
        "skus": {"gpu": {"iree": {"target_backend": "cuda", "target_chip": "bogus",
                                  "device": "cuda"}, "measurement": {"invocations": 0}}},
        "workloads": [{"model": "nope"}]})
    with pytest.raises(ConfigError) as err:
        load([path])
    text = "\n".join(err.value.problems)
    assert "skus.gpu.measurement.invocations: expected minimum 1" in text
    assert "workloads[0].model: expected one of" in text
    assert "skus.gpu.iree.target_chip: iree-compile" in text and "'bogus'" in text
    assert len(err.value.problems) == 3


@pytest.mark.tool
def test_the_compilers_answer_is_cached_per_compiler_backend_and_chip(tmp_path, chip_cache,
                                                                      monkeypatch):
    first = tools.check_target_chip("rocm", "gfx942")
    bad = tools.check_target_chip("rocm", "gfx9999")
    assert (first.accepted, first.cached, bad.accepted, bad.cached) == (True, False,
                                                                        False, False)
    entries = sorted((chip_cache / "iree-target-chips").glob("*.json"))
    assert len(entries) == 2
    saved = json.loads(entries[0].read_text())
    assert {saved["backend"], saved["compiler_version"]} == {"rocm", tools.compiler_version()}

    def no_compile(*args, **kwargs):
        raise AssertionError("the cached answer must be used")

    monkeypatch.setattr(tools, "capture", no_compile)
    assert tools.check_target_chip("rocm", "gfx942") == tools.ChipCheck(
        True, None, tools.compiler_version(), cached=True)
    again = tools.check_target_chip("rocm", "gfx9999")
    assert again.cached and again.error == "Unknown ROCM target 'gfx9999'"
    # A suite load asks the cache too: no compile.
    load([suite_file(tmp_path, gpu=ROCM)])
    # Another compiler (here: another identity of the tool) asks again.
    monkeypatch.setattr(tools, "_compiler_identity", lambda tool: "iree-compile 99")
    with pytest.raises(AssertionError, match="cached answer"):
        tools.check_target_chip("rocm", "gfx942")


def test_no_answer_is_not_cached(tmp_path, chip_cache, monkeypatch):
    def hang(*args, **kwargs):
        raise tools.Timeout("iree-compile")

    monkeypatch.setattr(tools, "capture", hang)
    answer = tools.check_target_chip("cuda", "sm_80", timeout=1)
    assert not answer.accepted and answer.error == "iree-compile did not answer within 1 s"
    assert not (chip_cache / "iree-target-chips").exists()


# --- device presence, on the measuring machine ---------------------------------------------

def has_gpu() -> bool:
    return bool(shutil.which("nvidia-smi") or shutil.which("rocminfo")
                or Path("/dev/nvidiactl").exists() or Path("/dev/kfd").exists())


def test_local_devices_are_always_present():
    assert tools.device_absent_reason("local-task") is None
    assert tools.device_absent_reason("local-sync") is None


@pytest.mark.tool
@pytest.mark.skipif(has_gpu(), reason="this machine has a GPU")
@pytest.mark.parametrize("device", ["cuda", "hip"])
def test_absent_gpu_devices_say_why(device):
    why = tools.device_absent_reason(device)
    assert why.startswith(f"no {device} device here: iree.runtime's {device} driver ")


@pytest.mark.tool
def test_a_probe_that_hangs_or_crashes_is_a_reason_not_a_hang_or_a_crash(monkeypatch):
    monkeypatch.setattr(tools, "_DEVICE_PROBE", "import time; time.sleep(30)")
    assert tools.device_absent_reason("cuda", timeout=0.5) == (
        "no cuda device here: probing iree.runtime's cuda driver took over 0.5 s")
    monkeypatch.setattr(tools, "_DEVICE_PROBE", "import os; os.abort()")
    assert tools.device_absent_reason("hip") == (
        "no hip device here: the probe of iree.runtime's hip driver exited with -6 (killed "
        "by SIGABRT)")
    monkeypatch.setattr(tools, "_DEVICE_PROBE", "print('{\"devices\": []}')")
    assert tools.device_absent_reason("vulkan") == (
        "no vulkan device here: iree.runtime's vulkan driver lists no device")
    monkeypatch.setattr(tools, "_DEVICE_PROBE", "print('{\"devices\": [\"gpu0\"]}')")
    assert tools.device_absent_reason("cuda") is None


# --- assemble: compile-only ----------------------------------------------------------------

IDENTITY = {"id": "gpu/iree/linear-4x8x8-f32/baseline", "model": "linear", "config": "default",
            "dtype": "f32", "shape": [4, 8, 8], "sku": "gpu", "backend": "iree",
            "recipe": "baseline", "mode": "inference", "workload": "linear-4x8x8-f32",
            "layers": None, "device": "cpu", "compile_mode": None, "group": None}
GRAPH = {"aten_ops": 2, "aten_ops_unique": 2, "op_histogram": {"aten.linear.default": 1}}


def compiled(dispatches: int = 3, size: int = 41462) -> StageResult:
    return StageResult("compile", data={"seconds": 0.4, "dispatch_count": dispatches,
                                        "binary_bytes": size, "executable_count": 3,
                                        "flags": ["--iree-hal-target-device=cuda"],
                                        "compiler_version": "3.13.0"})


def no_device(stage: str, reason: str = REASON) -> StageResult:
    """What the IREE job writes for run and verify where device_absent_reason says so."""
    return StageResult(stage, status=NO_DEVICE, failed_stage=stage, error=reason)


def compile_only_case(dispatches: int = 3, size: int = 41462) -> dict:
    results = [StageResult("export", data={"graph": GRAPH}), compiled(dispatches, size),
               no_device("run"), no_device("verify")]
    return assemble(IDENTITY, results, {"iree_device": "cuda"})


def test_assemble_gives_compile_only_when_run_and_verify_found_no_device():
    case = compile_only_case()
    assert (case["status"], case["stage"], case["error"]) == (COMPILE_ONLY, None, REASON)
    assert case["compile"]["dispatch_count"] == 3 and case["graph"]["aten_ops"] == 2
    assert case["timing"] is case["accuracy"] is case["memory"] is case["throughput"] is None
    unsupported = {"status": "unsupported", "reason": REASON}
    assert case["not_measured"] == {"timing": unsupported, "memory": unsupported,
                                    "accuracy": unsupported}


def test_a_failure_still_decides_and_no_compile_is_no_compile_only():
    failed = StageResult("compile", status="failed", failed_stage="compile", error="boom")
    case = assemble(IDENTITY, [StageResult("export"), failed, no_device("run"),
                               no_device("verify")], {})
    assert (case["status"], case["stage"], case["error"]) == ("failed", "compile", "boom")
    verify_failed = StageResult("verify", status="failed", failed_stage="verify", error="x")
    case = assemble(IDENTITY, [compiled(), no_device("run"), verify_failed], {})
    assert (case["status"], case["stage"]) == ("failed", "verify")
    # Without an ok compile there is nothing compile-only about it.
    case = assemble(IDENTITY, [no_device("run")], {})
    assert (case["status"], case["error"]) == ("unsupported", REASON)
    # Every stage ok: no not_measured at all.
    assert assemble(IDENTITY, [compiled()], {})["not_measured"] is None


# --- reports ------------------------------------------------------------------------------

def report_of(*cases: dict) -> dict:
    report = build_report(list(cases), suite_name="gpu", config_hash="x", config_source="s")
    validate_report(report)
    return report


def ok_cpu_case() -> dict:
    timing = {"median_ms": 1.0, "min_ms": 0.9, "p90_ms": 1.1, "cv": 0.01,
              "ci95_ms": [0.9, 1.1], "invocations": 3, "repetitions": 3,
              "invocation_medians_ms": [0.9, 1.0, 1.1], "first_run_ms": 2.0, "noisy": False}
    results = [StageResult("export", data={"graph": GRAPH}), compiled(2, 9000),
               StageResult("run", data={"timing": timing,
                                        "memory": {"peak_bytes": 10, "kind": "rss"}})]
    ident = {**IDENTITY, "id": "cpu/iree/linear-4x8x8-f32/baseline", "sku": "cpu"}
    return assemble(ident, results, {"iree_device": "local-task"})


@pytest.mark.tool
def test_compile_only_is_its_own_status_in_every_report():
    gpu, cpu = compile_only_case(), ok_cpu_case()
    report = report_of(gpu, cpu)  # the report schema takes it
    bad = json.loads(json.dumps(report))
    bad["cases"][1]["timing"] = bad["cases"][0]["timing"]  # compile-only claims no timing
    with pytest.raises(Exception, match="None|null|not of type"):
        validate_report(bad)
    assert common.status(gpu) == COMPILE_ONLY and common.counts([gpu, cpu])[COMPILE_ONLY] == 1

    md = markdown.render(report)
    assert "2 cases: 1 ✅ ok, 1 ⚙ compile-only." in md
    assert "### Compile-only (1)" in md and f"- `{gpu['id']}`: {REASON}" in md
    row = next(line for line in md.splitlines() if line.startswith("| linear") and "gpu" in line)
    assert "⚙ compile-only" in row and "⊘ unsupported" in row and "| 3 |" in row
    assert "| iree | 1 / 1 | 1 / 2 | 0 | 0 | 0 | 1 |" in md  # passing table: not failed

    rows = {r["id"]: r for r in csv_report.frame(report).to_dict("records")}
    assert rows[gpu["id"]]["status"] == rows[gpu["id"]]["report_status"] == COMPILE_ONLY
    assert rows[gpu["id"]]["timing_not_measured"] == f"unsupported: {REASON}"
    assert rows[gpu["id"]]["dispatch_count"] == 3

    page = html.render(report)
    assert '<td class="t">compile-only</td>' in page  # a word; its shape is the page's CSS
    assert 'class="st-compile-only"' in page and "<h3>Compile-only (1)</h3>" in page

    records = dashboard.render(report)
    mine = [r for r in records if r["benchmark"]["extra_info"]["case_id"] == gpu["id"]]
    assert {r["metric"]["name"] for r in mine} == {"compile time (s)", "dispatch count",
                                                   "binary size (bytes)"}  # no latency
    assert all(r["runners"][0]["name"] == "cpu" and r["runners"][0]["gpu_count"] == 0
               for r in mine)
    assert mine[0]["benchmark"]["extra_info"]["report_status"] == COMPILE_ONLY
    assert mine[0]["benchmark"]["extra_info"]["target_device"] == "cuda"

    cov = coverage.model_coverage({"cases": [gpu]})
    iree = cov["models"]["linear"]["backends"]["iree"]
    assert (iree["status"], iree["compile_only"], iree["compiled"], iree["ran"],
            iree["failed"]) == (COMPILE_ONLY, 1, 1, 0, 0)
    assert "compile-only 1/1" in coverage.format_coverage(cov)
    cov = coverage.model_coverage({"cases": [gpu, cpu]})
    assert cov["models"]["linear"]["backends"]["iree"]["status"] == "pass"


def test_a_golden_time_of_a_compile_only_case_is_not_judged_its_dispatches_are(tmp_path):
    gfile = tmp_path / "gpu.json"
    gfile.write_text(json.dumps({
        "kind": "benchflow-goldens", "schema_version": "1.0", "sku": "gpu",
        "cases": {IDENTITY["id"]: {"median_ms": 2.0, "invocation_medians_ms": [2.0] * 5,
                                   "cv": 0.0, "dispatch_count": 2, "binary_bytes": 50000,
                                   "taken_at": None, "git_sha": None}}}))
    g = golden_section(compile_only_case(), gfile, {})
    assert (g["verdict"], g["dispatch_verdict"], g["size_verdict"]) == (
        "no-golden", "regression", "pass")
    assert g["reason"] == (f"compile-only: time not measured here ({REASON}); the golden time "
                           "2 ms is not judged, dispatch count and size are")
    assert g["ratio"] is None and g["value_ms"] == 2.0
    found = gate.findings({"cases": [{**compile_only_case(), "golden": g}]})
    assert [(f.case_id, f.aspects) for f in found] == [(IDENTITY["id"], ["dispatch"])]


# --- bless, then check: real compiles for cuda sm_80 --------------------------------------

# A matmul whose result two elementwise ops read: 3 dispatches by default, 1 with
# aggressive fusion (iree-compile 3.13, cuda sm_80).
MULTI_USE_MLIR = """\
func.func @main(%a: tensor<16x32xf32>, %b: tensor<32x16xf32>)
    -> (tensor<16x16xf32>, tensor<16x16xf32>) {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x16xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %m = linalg.matmul ins(%a, %b : tensor<16x32xf32>, tensor<32x16xf32>)
                     outs(%z : tensor<16x16xf32>) -> tensor<16x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %t = math.exp %x : f32
    linalg.yield %t : f32
  } -> tensor<16x16xf32>
  %q = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %t = math.sin %x : f32
    linalg.yield %t : f32
  } -> tensor<16x16xf32>
  return %r, %q : tensor<16x16xf32>, tensor<16x16xf32>
}
"""
FUSE = "--iree-dispatch-creation-enable-aggressive-fusion=true"


def bench_file_case(work: Path, sel, sku_name: str, sku: dict, benchmark: str) -> dict:
    """One benchmark file on one SKU through the stage functions its rules call: compile
    (rule compile_bench_file), run (run_bench_file: no device here), case (case_bench_file)."""
    f = sel.file(benchmark)
    out = work / sku_name / benchmark
    out.mkdir(parents=True, exist_ok=True)
    meta, timing, case = out / "compile.json", out / "timing.json", out / "case.json"
    compile_module(mlir=str(f.mlir), sku=sku, flags=bench_compile_flags(f, sku), timeout=120,
                   vmfb=str(out / "module.vmfb"), meta=str(meta), log=str(out / "compile.log"))
    run = run_benchmark_file(vmfb=str(out / "module.vmfb"), compile_meta=str(meta),
                             spec=run_spec(f, sku, sel.weights(benchmark)), sku=sku,
                             timeout=60, timing=str(timing), log=str(out / "run.log"))
    assert run.status == NO_DEVICE, run.error
    return case_benchmark_file(identity=bench_identity(sel, sku_name, benchmark), sku=sku,
                               compiled=str(meta), run=str(timing), case=str(case),
                               provenance=bench_provenance(sel, sku_name, benchmark),
                               file_goldens=f.goldens(sel.golden_key(sku_name)),
                               gate={"size_tolerance": 1.05})


needs_no_gpu = pytest.mark.skipif(has_gpu(), reason="compile-only needs a machine without "
                                                    "the GPU")


@pytest.mark.tool
@needs_no_gpu
def test_bless_a_compile_only_case_then_a_flag_that_adds_dispatches_fails_check(tmp_path,
                                                                                capsys):
    root = tmp_path / "benchmarks"
    (root / "toy").mkdir(parents=True)
    (root / "toy" / "mm.mlir").write_text(MULTI_USE_MLIR)
    (root / "toy" / "mm_cuda.json").write_text(json.dumps({
        "inputs": ["16x32xf32", "32x16xf32"], "function_run": "main", "device": "cuda",
        "mlir_file_path": "toy/mm.mlir", "benchmark_repetitions": 3,
        "benchmark_min_warmup_time": 0.1}))

    def report_with(flags: list[str]) -> Path:
        config = validate_suite({"skus": {"gpu": {"iree": {**CUDA["iree"],
                                                           "compile_flags": flags}}},
                                 "benchmark_files": {"dir": str(root), "models": ["toy"],
                                                     "backends": []}}, "s.yaml")
        sel = select(config, "s.yaml", env=NO_ENV)
        case = bench_file_case(tmp_path / "work" / str(len(flags)), sel, "gpu",
                               config["skus"]["gpu"], "toy.mm_cuda")
        path = tmp_path / f"report-{len(flags)}.json"
        path.write_text(json.dumps(report_of(case)))
        return path

    blessed = report_with([FUSE])
    case = json.loads(blessed.read_text())["cases"][0]
    assert case["status"] == COMPILE_ONLY and case["compile"]["dispatch_count"] == 1
    assert case["error"].startswith("no cuda device here: ")
    assert "--iree-cuda-target=sm_80" in case["compile"]["flags"]
    goldens = tmp_path / "goldens"
    assert main(["bless", "--report", str(blessed), "--goldens", str(goldens), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "+ gpu/iree/toy.mm_cuda/baseline" in out and "compile-only: no time" in out
    entry = json.loads((goldens / "gpu.json").read_text())["cases"][case["id"]]
    assert (entry["compile_only"], entry["median_ms"], entry["invocation_medians_ms"],
            entry["dispatch_count"]) == (True, None, [], 1)
    # The same report passes its own goldens.
    assert main(["check", "--report", str(blessed), "--goldens", str(goldens)]) == 0
    assert "1 compile-only case(s) judged on dispatch count and size only" in \
        capsys.readouterr().out

    changed = report_with([])  # the fusion flag dropped: 3 dispatches
    assert json.loads(changed.read_text())["cases"][0]["compile"]["dispatch_count"] == 3
    assert main(["check", "--report", str(changed), "--goldens", str(goldens)]) == 1
    out = capsys.readouterr().out
    assert "REGRESSED gpu/iree/toy.mm_cuda/baseline: dispatch regressed (dispatches x3.000 " \
           "of 1)" in out


# --- a real upstream sharktank ROCm file, compile-only ------------------------------------

@pytest.mark.tool
@needs_no_gpu
def test_an_upstream_rocm_file_compiles_for_gfx942_and_is_judged_on_its_goldens(tmp_path):
    """iree-test-suites' current sdxl/clip_rocm.json on a rocm gfx942 SKU whose golden key
    is mi300: its MLIR under the upstream name (<artifacts>/sdxl_clip/model.mlir), compiled
    here, not run (no hip device), its dispatch count and size judged against
    golden_dispatch / golden_size["mi300"]; a CPU SKU still skips it."""
    art = tmp_path / "artifacts"
    (art / "sdxl_clip").mkdir(parents=True)
    (art / "sdxl_clip" / "model.mlir").write_text(CLIP_MLIR)
    import numpy as np

    write_irpa(art / "sdxl_clip" / "real_weights.irpa", bias=np.arange(64, dtype=np.int64))
    config = validate_suite({
        "skus": {"mi300": ROCM, "cpu-host": {"iree": {"target_cpu": "host"}}},
        "benchmark_files": {"dir": str(CURRENT), "models": ["sdxl"], "filename": "clip_rocm",
                            "backends": [], "golden_keys": {"mi300": "mi300"},
                            "artifacts_dir": str(art)}}, "s.yaml")
    sel = select(config, "s.yaml", env=NO_ENV)
    assert [c.id for c in sel.cases] == ["mi300/iree/sdxl.clip_rocm/baseline"]
    assert [(f, s) for f, s, _ in sel.skipped] == [("sdxl.clip_rocm", "cpu-host")]
    assert bench_compile_flags(sel.file("sdxl.clip_rocm"), config["skus"]["mi300"])[:3] == [
        "--iree-input-type=auto", "--iree-hal-target-device=hip", "--iree-rocm-target=gfx942"]
    case = bench_file_case(tmp_path / "work", sel, "mi300", config["skus"]["mi300"],
                           "sdxl.clip_rocm")
    assert case["status"] == COMPILE_ONLY
    assert case["error"].startswith("no hip device here: ")
    assert case["not_measured"]["timing"]["status"] == "unsupported"
    assert case["compile"]["dispatch_count"] == 1 and case["compile"]["binary_bytes"] > 0
    g = case["golden"]
    assert g["source"] == str(CURRENT / "sdxl" / "clip_rocm.json")
    assert (g["dispatch_golden"], g["size_golden_bytes"]) == (794, 460000)
    assert (g["dispatch_verdict"], g["size_verdict"]) == ("improvement", "pass")
    assert g["dispatch_rule"] == "sharktank: dispatch count <= golden_dispatch"
    assert g["size_rule"] == "sharktank: binary size <= golden_size"
    assert g["verdict"] == "no-golden" and g["reason"].startswith(
        "compile-only: time not measured here (no hip device here: ")
    assert "the golden time 15 ms is not judged" in g["reason"]
    report = report_of(case)
    assert "### Compile-only (1)" in markdown.render(report)
    assert gate.findings(report) == []


def test_a_golden_without_a_time_must_say_compile_only(tmp_path):
    from workflow.regression.goldens import problems_of

    entry = {"median_ms": None, "invocation_medians_ms": [], "cv": None, "dispatch_count": 1,
             "binary_bytes": 1024, "taken_at": None, "git_sha": None}
    doc = {"kind": "benchflow-goldens", "schema_version": "1.0", "sku": "gpu",
           "cases": {IDENTITY["id"]: {**entry, "compile_only": True}}}
    assert problems_of(doc, "g.json") == []
    doc["cases"][IDENTITY["id"]] = entry  # a time-less golden that does not say why
    problems = problems_of(doc, "g.json")
    assert f"g.json: cases.{IDENTITY['id']}.median_ms: expected number, got NoneType None" \
        in problems
    doc["cases"][IDENTITY["id"]] = {**entry, "compile_only": True, "median_ms": 1.0}
    assert problems_of(doc, "g.json") == [
        f"g.json: cases.{IDENTITY['id']}.median_ms: expected null, got float 1.0"]


@needs_no_gpu
@pytest.mark.e2e
def test_snakemake_records_an_upstream_rocm_file_as_compile_only(tmp_path, chip_cache):
    """The same file through rules/bench_files.smk (compile_bench_file, run_bench_file,
    case_bench_file): the case record only, not the report."""
    import os

    import numpy as np

    from tests.conftest import snakemake

    (tmp_path / "artifacts" / "sdxl_clip").mkdir(parents=True)
    (tmp_path / "artifacts" / "sdxl_clip" / "model.mlir").write_text(CLIP_MLIR)
    write_irpa(tmp_path / "artifacts" / "sdxl_clip" / "real_weights.irpa",
               bias=np.arange(64, dtype=np.int64))
    write_suite(tmp_path / "suite.yaml", {
        "suite_name": "gpu", "skus": {"mi300": ROCM},
        "benchmark_files": {"dir": str(CURRENT), "models": ["sdxl"], "backends": [],
                            "golden_keys": {"mi300": "mi300"}, "artifacts_dir": "artifacts"}})
    target = "results/bench_files/cases/mi300/sdxl.clip_rocm.json"
    env = {**{k: v for k, v in os.environ.items() if k not in NO_ENV},
           tools.CACHE_ENV: str(chip_cache)}
    snakemake(tmp_path, target, "--configfile", str(tmp_path / "suite.yaml"), env=env)
    case = json.loads((tmp_path / target).read_text())
    assert case["status"] == COMPILE_ONLY and case["error"].startswith("no hip device here")
    assert "--iree-rocm-target=gfx942" in case["compile"]["flags"]
    assert (case["golden"]["dispatch_verdict"], case["golden"]["size_verdict"]) == (
        "improvement", "pass")
    run = json.loads((tmp_path / "results/bench_files/run/mi300/sdxl.clip_rocm/timing.json")
                     .read_text())
    assert (run["status"], run["stage"]) == (NO_DEVICE, "run")


# --- the export-based pipeline through Snakemake: bless, then a flag that adds one ------

@needs_no_gpu
@pytest.mark.e2e
def test_snakemake_compile_only_suite_bless_then_an_added_dispatch_fails_the_gate(
        tmp_path, capsys):
    from tests.conftest import FAST_MEASUREMENT, snakemake
    from tests.test_e2e import job_counts

    def suite(flags: list[str]) -> str:
        return str(write_suite(tmp_path / "suite.yaml", {
            "skus": {"gpu": {"iree": {**CUDA["iree"], "compile_flags": flags},
                             "measurement": dict(FAST_MEASUREMENT)}},
            # LayerNorm, Linear, GELU: 2 dispatches with aggressive fusion, 3 without
            # (iree-compile 3.13, cuda sm_80).
            "workloads": [{"model": "ln_linear_gelu", "shapes": [[128, 256, 256]]}]}))

    snakemake(tmp_path, "results/report.json", "--configfile", suite([FUSE]))
    report = tmp_path / "results" / "report.json"
    (case,) = json.loads(report.read_text())["cases"]
    assert case["status"] == COMPILE_ONLY and case["compile"]["dispatch_count"] == 2
    assert case["timing"] is None and case["accuracy"] is None
    assert case["error"].startswith("no cuda device here")
    assert main(["bless", "--report", str(report), "--goldens", str(tmp_path / "goldens"),
                 "--yes"]) == 0
    # Blessing re-judges (the report step), it does not recompile: the run's own plan
    # (its "Job stats", printed before any job) says so, without a dry run before it.
    rejudged = snakemake(tmp_path, "results/report.json", "--configfile", suite([FUSE]))
    plan = job_counts(rejudged)
    assert "report" in plan and "iree_batch" not in plan, rejudged.stderr
    capsys.readouterr()
    assert main(["check", "--report", str(report)]) == 0

    # The flag dropped: the gate run recompiles (its plan has the IREE batch the re-judging
    # run above had not), remakes the report, then fails on it. One snakemake run for the
    # report and the gate, which would otherwise find the report made and only gate it.
    gate = snakemake(tmp_path, "results/gate.json", "--configfile", suite([]), check=False)
    assert job_counts(gate).get("iree_batch") == 1, gate.stderr
    (case,) = json.loads(report.read_text())["cases"]
    assert case["compile"]["dispatch_count"] == 3
    assert case["golden"]["dispatch_verdict"] == "regression"
    assert main(["check", "--report", str(report)]) == 1
    assert "dispatch regressed (dispatches x1.500 of 2)" in capsys.readouterr().out
    assert gate.returncode != 0
