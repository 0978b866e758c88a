"""The GPU tier's rules (tests/gpu/checks.py), here without a GPU: on fixture records
made by benchflow's own record builders with the first H100 run's numbers
(/work/shared/gpu/h100-2026-11-27/), on a fake nvidia-smi, on the two suites as the
loader plans them, and, for the standalone measurements, on a real CPU run."""

from __future__ import annotations

import copy
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FAST_MEASUREMENT, REPO, snakemake, write_suite
from tests.gpu import checks
from workflow.backends.torch.ops_profile import CUDA_MODE
from workflow.records.case import case_record, section
from workflow.records.kernels import kernels_section
from workflow.records.report import case_problem, read_report
from workflow.suite.load import load

# The IREE CUDA cases' profiling error of the first H100 run (iree-report.md), verbatim.
IREE_CUDA_PROFILE_ERROR = (
    "profiling (host-execution) failed: iree-benchmark-module exited with 1: "
    "c/runtime/src/iree/hal/drivers/cuda/cuda_device.c:1214: UNIMPLEMENTED; CUDA "
    "HAL-native profiling is not implemented")


def timing(median_ms: float) -> dict:
    return section("timing", {
        "median_ms": median_ms, "min_ms": median_ms * 0.99, "p90_ms": median_ms * 1.01,
        "cv": 0.003, "ci95_ms": None, "invocations": 3, "repetitions": 5,
        "invocation_medians_ms": [median_ms] * 3, "first_run_ms": median_ms * 3,
        "noisy": False})


def record(cid: str, *, status: str = "ok", median_ms: float | None = None,
           kernels: dict | None = None, profile: dict | None = None, stage=None,
           error: str | None = None) -> dict:
    """A schema-valid case record of an H100 suite: `cid` is sku/backend/workload/recipe;
    an IREE case ran on its SKU's cuda device, a torch case on a `-cuda` workload's."""
    sku, backend, workload, recipe = cid.split("/")
    parts = workload.split("-")  # model[-config]-shape-dtype[-cuda]
    at = next(i for i, p in enumerate(parts) if re.fullmatch(r"\d+(x\d+)*", p))
    identity = {"id": cid, "model": parts[0], "config": parts[1] if at == 2 else "default",
                "dtype": parts[at + 1], "shape": [int(d) for d in parts[at].split("x")],
                "sku": sku, "backend": backend,
                "recipe": recipe, "mode": "inference", "workload": workload,
                "device": "cuda" if workload.endswith("-cuda") else "cpu"}
    rec = case_record(identity, status=status, stage=stage, error=error,
                      timing=timing(median_ms) if median_ms is not None else None,
                      kernels=kernels, profile=profile,
                      provenance={"host": "vm", "iree_device": "cuda"}
                      if backend == "iree" else {"host": "vm", "gpu_name": "NVIDIA H100"})
    assert case_problem(rec) is None, case_problem(rec)
    return rec


def iree_rows() -> dict:
    return kernels_section(source="iree-profile", mode="host-execution", calls=10, rows=[
        {"name": "main$async_dispatch_0_matmul_1920x3072x3072_f32", "count": 10,
         "total_ms": 180.1, "mean_ms": 18.01, "share": 1.0, "workgroup": None}], seconds=0.4)


def torch_rows(mode: str = CUDA_MODE, total_ms: float = 0.55) -> dict:
    return kernels_section(source="torch.profiler", mode=mode, calls=10, rows=[
        {"name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "count": 10,
         "total_ms": total_ms, "mean_ms": total_ms / 10, "share": 1.0, "op": "aten::mm"}],
        seconds=0.05)


IREE_F32 = "h100/iree/linear-1920x3072x3072-f32/baseline"
IREE_F16 = "h100/iree/linear-1920x3072x3072-f16/baseline"
BERT = "h100/iree/bert-tiny-1x128-f32/baseline"
EAGER = "h100/torch-eager/linear-1920x3072x3072-bf16-cuda/baseline"
INT4 = "h100/torch-eager/linear-1920x3072x3072-bf16-cuda/int4wo-128"
FLOAT8 = "h100/torch-eager/linear-1920x3072x3072-bf16-cuda/float8dq-row"


# --- is there a GPU? --------------------------------------------------------------------

def test_listed_gpus_reads_nvidia_smi_lines():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-3f1c2b7e-0d7a-4e0c-9a1b-2c3d4e5f6a7b)\n"
            "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-00000000-1111-2222-3333-444444444444)\n")
    assert checks.listed_gpus(text) == ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"]
    assert checks.listed_gpus("No devices found.\n") == []
    assert checks.listed_gpus("") == []


def test_missing_reason_names_every_missing_part():
    suite = checks.TORCH_SUITE
    assert checks.missing_reason(suite, [None, None]) is None
    reason = checks.missing_reason(suite, ["no NVIDIA GPU: nvidia-smi is not on PATH", None,
                                           "torch 2.13.0+cpu cannot use CUDA (...)"])
    assert reason == ("h100_torch.yaml needs a CUDA GPU here: no NVIDIA GPU: nvidia-smi is "
                      "not on PATH; torch 2.13.0+cpu cannot use CUDA (...)")


def test_torch_cuda_missing_says_so_of_this_torch():
    import torch

    reason = checks.torch_cuda_missing()
    assert (reason is None) == torch.cuda.is_available()
    if reason is not None:
        assert torch.__version__ in reason and "torch.cuda.is_available() is False" in reason
        assert ("a CPU build" in reason) == (torch.version.cuda is None)


def _fake_nvidia_smi(bin_dir: Path, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / "nvidia-smi"
    tool.write_text("#!/bin/sh\n" + body + "\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)


@pytest.mark.tool  # starts the fake nvidia-smi
def test_nvidia_gpu_missing_asks_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert checks.nvidia_gpu_missing() == "no NVIDIA GPU: nvidia-smi is not on PATH"
    _fake_nvidia_smi(tmp_path / "bin", "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)'")
    assert checks.nvidia_gpu_missing() is None
    _fake_nvidia_smi(tmp_path / "bin", "echo 'No devices found.'")
    assert checks.nvidia_gpu_missing() == "no NVIDIA GPU: nvidia-smi -L lists none"
    _fake_nvidia_smi(tmp_path / "bin", 'echo "NVIDIA-SMI has failed because it couldn\'t '
                                       'communicate with the NVIDIA driver." >&2; exit 9')
    assert checks.nvidia_gpu_missing() == (
        "no NVIDIA GPU: nvidia-smi -L exited with 9 (NVIDIA-SMI has failed because it "
        "couldn't communicate with the NVIDIA driver.)")


# --- the rules on records -------------------------------------------------------------

def test_status_problems_pass_measured_and_reasoned_cases_only():
    cases = [record(IREE_F32, median_ms=18.22),
             record(FLOAT8, status="unsupported",
                    error="float8 dynamic quantization needs CUDA sm89+ (this GPU: sm80)"),
             record(BERT, status="failed", stage="compile",
                    error="iree-compile exited with 1: error: failed to legalize operation "
                          "'torch.operator' (torch.aten.detach_)"),
             record(INT4, status="skipped", error="   ")]
    assert checks.status_problems(cases) == [
        f"{BERT}: failed at compile: iree-compile exited with 1: error: failed to legalize "
        "operation 'torch.operator' (torch.aten.detach_)",
        f"{INT4}: skipped: no reason"]
    assert checks.status_problems(cases[:2]) == []


def test_missing_cases_names_both_directions():
    cases = [record(IREE_F32, median_ms=18.22), record(IREE_F16, median_ms=0.4954)]
    assert checks.missing_cases(cases, {IREE_F32, IREE_F16}) == []
    assert checks.missing_cases(cases, {IREE_F32, BERT}) == [
        f"{BERT}: planned, no record", f"{IREE_F16}: a record, not planned"]


def test_time_problems_flag_medians_off_by_more_than_ten_percent():
    # The first H100 run: IREE f32 linear 18.22 ms against iree-benchmark-module alone
    # 18.1 ms; torch eager bf16 0.05629 ms against triton's do_bench 0.0549 ms.
    cases = [record(IREE_F32, median_ms=18.22), record(EAGER, median_ms=0.05629)]
    assert checks.time_problems(cases, {IREE_F32: 18.1, EAGER: 0.0549}) == []
    # 10 % either way is within; past it is not, whichever side is slower.
    assert checks.time_problems(cases[:1], {IREE_F32: 18.22 / 1.099}) == []
    assert checks.time_problems(cases[:1], {IREE_F32: 18.22 / 0.901}) == []
    slow = checks.time_problems(cases, {IREE_F32: 18.1, EAGER: 0.0549 / 1.2})
    assert slow == [f"{EAGER}: benchflow 0.05629 ms, standalone 0.04575 ms (x1.230; "
                    "expected within 10%)"]
    # A standalone time in the wrong unit (s, not ms) is caught, not divided away.
    assert len(checks.time_problems(cases[:1], {IREE_F32: 0.0181})) == 1
    assert checks.time_problems(cases, {IREE_F32: 18.1}) == [f"{EAGER}: no standalone time"]
    assert checks.time_problems(cases, {IREE_F32: 18.1, EAGER: 0.0549}, tolerance=0.01) == [
        f"{EAGER}: benchflow 0.05629 ms, standalone 0.0549 ms (x1.025; expected within 1%)"]


def test_iree_kernel_problems_need_rows_without_error_on_cuda():
    failed = kernels_section(source="iree-profile", mode="host-execution", calls=None,
                             rows=[], seconds=0.2, error=IREE_CUDA_PROFILE_ERROR)
    cases = [record(IREE_F32, median_ms=18.22, kernels=iree_rows()),
             record(IREE_F16, median_ms=0.4954, kernels=failed),
             record("h100/iree/mlp-64x256x512-f32/baseline", median_ms=0.923, kernels=None),
             record(BERT, status="failed", stage="compile", error="iree-compile exited")]
    assert checks.iree_kernel_problems(cases) == [
        f"{IREE_F16}: kernels from iree-profile failed: {IREE_CUDA_PROFILE_ERROR}",
        "h100/iree/mlp-64x256x512-f32/baseline: no kernels section (not profiled)"]
    # Whatever the source (an nsys- or ncu-based one), rows without an error pass; none
    # fail naming it.
    other = {**iree_rows(), "source": "nsys"}
    assert checks.iree_kernel_problems([{**cases[0], "kernels": other}]) == []
    assert checks.iree_kernel_problems([{**cases[0], "kernels": {**other, "rows": []}}]) == [
        f"{IREE_F32}: kernels from nsys has no rows"]
    # A case on the CPU is not this rule's.
    cpu = copy.deepcopy(cases[1])
    cpu["provenance"]["iree_device"] = "local-task"
    assert checks.iree_kernel_problems([cpu]) == []


def test_torch_kernel_problems_need_cuda_device_time():
    good = record(EAGER, median_ms=0.05629, kernels=torch_rows())
    assert checks.torch_kernel_problems([good]) == []
    cpu_mode = record(INT4, median_ms=1.224, kernels=torch_rows(mode="cpu"))
    no_time = record(INT4, median_ms=1.224, kernels=torch_rows(total_ms=0.0))
    errored = record(INT4, median_ms=1.224, kernels=kernels_section(
        source="torch.profiler", mode="cuda", calls=10, rows=[], seconds=0.1,
        error="RuntimeError: CUPTI_ERROR_NOT_INITIALIZED"))
    assert checks.torch_kernel_problems([cpu_mode]) == [
        f"{INT4}: kernels from torch.profiler in mode cpu; expected torch.profiler in mode "
        f"{CUDA_MODE}"]
    assert checks.torch_kernel_problems([no_time]) == [
        f"{INT4}: kernels rows hold no CUDA device time"]
    assert checks.torch_kernel_problems([errored]) == [
        f"{INT4}: kernels from torch.profiler failed: RuntimeError: CUPTI_ERROR_NOT_INITIALIZED"]
    assert checks.torch_kernel_problems([record(INT4, median_ms=1.224)]) == [
        f"{INT4}: no kernels section (not profiled)"]
    # IREE cases and unmeasured torch cases are not this rule's.
    assert checks.torch_kernel_problems([
        record(IREE_F32, median_ms=18.22),
        record(FLOAT8, status="unsupported", error="needs sm89+")]) == []


def test_snapshot_problems_need_a_non_empty_file_where_asked(tmp_path):
    workload = "linear-1920x3072x3072-bf16-cuda"
    rel = (f"results/torch/h100/b0/artifacts/{workload}.torch-eager.baseline"
           ".memory_snapshot.pickle")
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).write_bytes(b"\x80\x04snapshot")
    snap = {"trace": None, "memory_snapshot": rel, "memory_snapshot_status": None}
    cases = [record(EAGER, median_ms=0.05629, profile=snap),
             record(INT4, median_ms=1.224, profile={
                 "trace": None, "memory_snapshot": None,
                 "memory_snapshot_status": "unsupported: CUDA memory snapshots need a CUDA "
                                           "device; this case ran on the CPU"})]
    assert checks.snapshot_problems(cases, {workload}, tmp_path) == [
        f"{INT4}: no memory snapshot (unsupported: CUDA memory snapshots need a CUDA device; "
        "this case ran on the CPU)"]
    assert checks.snapshot_problems(cases, set(), tmp_path) == []  # nobody asked
    (tmp_path / rel).write_bytes(b"")
    assert checks.snapshot_problems(cases[:1], {workload}, tmp_path) == [
        f"{EAGER}: memory snapshot {rel} is empty"]
    (tmp_path / rel).unlink()
    assert checks.snapshot_problems(cases[:1], {workload}, tmp_path) == [
        f"{EAGER}: memory snapshot {rel} is missing"]
    assert checks.snapshot_problems([record(EAGER, median_ms=0.05629)], {workload},
                                    tmp_path) == [f"{EAGER}: no memory snapshot (no status either)"]


# --- the suites and the standalone measurements, for real ---------------------------------

@pytest.mark.tool  # the loader asks iree-compile whether it compiles for sm_80
def test_the_gpu_suites_load_and_plan_the_h100_cases():
    iree = load([checks.IREE_SUITE])
    assert sorted(c.id for c in iree.cases) == sorted(
        f"h100/iree/{w}/baseline" for w in ("linear-1920x3072x3072-f32",
                                            "linear-1920x3072x3072-f16",
                                            "mlp-64x256x512-f32", "bert-tiny-1x128-f32"))
    assert iree.sku("h100")["iree"]["target_chip"] == "sm_80"
    torch_suite = load([checks.TORCH_SUITE])
    eager = "linear-1920x3072x3072-bf16-cuda"
    assert sorted(c.id for c in torch_suite.cases) == sorted(
        [f"h100/torch-eager/{eager}/{r}" for r in ("baseline", "int8wo", "float8dq-row",
                                                    "int4wo-128")]
        + ["h100/torch-inductor/linear-1920x14336x3072-bf16-cuda/baseline"])
    assert {w.id for w in torch_suite.workloads.values() if w.memory_profiler} == {eager}


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    """A one-workload CPU suite on IREE (local-sync) and torch eager, run once: the
    standalone measurements' own test, on real files."""
    workdir = tmp_path_factory.mktemp("cpu")
    suite = {"suite_name": "gpu_checks",
             "skus": {"host": {"iree": {"target_cpu": "host", "device": "local-sync"},
                               "torch": {"threads": 1},
                               "measurement": dict(FAST_MEASUREMENT)}},
             "workloads": [{"model": "linear", "shapes": [[64, 256, 256]],
                            "backends": ["iree", "torch-eager"], "recipes": ["baseline"]}]}
    path = write_suite(workdir / "suite.yaml", suite)
    snakemake(workdir, "results/report.json", "--configfile", str(path))
    return workdir, read_report(workdir / "results" / "report.json")["cases"], load([path])


@pytest.mark.e2e
def test_standalone_times_of_real_cases_are_of_the_same_order(cpu_run):
    """Each standalone time of a real case, in ms, is of the order of its median: a unit
    mistake (s or us) or another module would be a factor of 1000 or a shape's ratio
    away. Not within 10 %: this machine's other test worker loads the CPUs."""
    workdir, cases, suite = cpu_run
    assert checks.status_problems(cases) == []
    assert checks.missing_cases(cases, {c.id for c in suite.cases}) == []
    (iree_case,) = checks.ok_cases(cases, "iree")
    (torch_case,) = checks.ok_cases(cases, "torch")
    alone = {iree_case["id"]: checks.iree_standalone_ms(workdir, iree_case, suite.sku("host")),
             torch_case["id"]: checks.torch_standalone_ms(suite, torch_case)}
    for case in (iree_case, torch_case):
        ratio = case["timing"]["median_ms"] / alone[case["id"]]
        assert 0.2 < ratio < 5, (case["id"], case["timing"]["median_ms"], alone[case["id"]])
    assert checks.time_problems([iree_case, torch_case], alone, tolerance=4.0) == []


@pytest.mark.e2e
def test_the_kernel_rules_on_real_records(cpu_run):
    """The records of a real run, as a CUDA run would have them: an IREE case with
    iree-profile's rows passes, a torch case with a CPU activity profile does not."""
    _, cases, _ = cpu_run
    (iree_case,) = checks.ok_cases(cases, "iree")
    (torch_case,) = checks.ok_cases(cases, "torch")
    assert iree_case["kernels"]["rows"] and torch_case["kernels"]["mode"] == "cpu"
    as_cuda = copy.deepcopy(iree_case)
    as_cuda["provenance"]["iree_device"] = "cuda"
    assert checks.iree_kernel_problems([iree_case, as_cuda]) == []
    as_cuda["kernels"]["error"] = IREE_CUDA_PROFILE_ERROR
    assert len(checks.iree_kernel_problems([as_cuda])) == 1
    torch_cuda = {**torch_case, "device": "cuda"}
    assert checks.torch_kernel_problems([torch_case]) == []
    assert checks.torch_kernel_problems([torch_cuda]) == [
        f"{torch_case['id']}: kernels from torch.profiler in mode cpu; expected "
        f"torch.profiler in mode {CUDA_MODE}"]


@pytest.mark.tool  # starts pytest on the GPU tier
def test_the_gpu_tier_skips_with_its_reasons_without_a_gpu():
    """`pytest -m gpu` on a machine without an NVIDIA GPU collects the tier and skips
    each test, naming what is missing, and exits 0 (not 5, nothing collected)."""
    missing = checks.nvidia_gpu_missing()
    if missing is None:
        pytest.skip("this machine has an NVIDIA GPU: the tier runs here (make gpu)")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-m", "gpu", "-p", "no:cacheprovider",
         "tests/gpu"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^7 skipped, \d+ deselected", proc.stdout, re.M), proc.stdout
    for suite in (checks.IREE_SUITE, checks.TORCH_SUITE):
        assert f"{suite.name} needs a CUDA GPU here: {missing}" in proc.stdout, proc.stdout
    # Each suite names its own second need: IREE's CUDA HAL, torch's CUDA.
    assert "no cuda device here" in proc.stdout, proc.stdout
    assert "torch.cuda.is_available() is False" in proc.stdout, proc.stdout
