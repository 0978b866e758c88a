"""Per-kernel GPU attribution (issue 35): an IREE CUDA case's kernels timed by Nsight
Systems and joined to its dispatch functions (backends/iree/gpu_kernels.py, wired in
jobs/kernels.py), and a torch CUDA case's kernels with the ops that launched them
(backends/torch/ops_profile.kernel_rows). No GPU here: nsys's documented CSV in
tests/data/gpu_kernels/, a stand-in `nsys` first on PATH, and events shaped as
torch.profiler's FunctionEvent."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest

from workflow.backends.iree import gpu_kernels, profile
from workflow.backends.iree.tools import benchmark_argv
from workflow.backends.torch.ops_profile import kernel_rows, op_rows, profile_ops
from workflow.jobs.kernels import profiled_kernels
from workflow.records import schemas
from workflow.records.kernels import kernels_section

DATA = Path(__file__).parent / "data" / "gpu_kernels"
TABLE = DATA / "ln_linear_gelu.cuda_gpu_kern_sum.csv"
STATISTICS = Path(__file__).parent / "data" / "iree_profile" / \
    "ln_linear_gelu.cuda-sm80.statistics.csv"
MATMUL = "main$async_dispatch_2_matmul_128x256x256_f32"
# Its kernel: IREE's CUDA target makes the `$` a `_` (PTX of a real compile, the README).
MATMUL_KERNEL = "main_async_dispatch_2_matmul_128x256x256_f32"
SPLIT_K = ("void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, "
           "false>(cublasSplitKParams<T6>, const T4 *, const T5 *, T5 *, const T6 *, "
           "const T6 *, const T7 *, const T4 *, T7 *, void *, long, T6 *, int *)")
M = {"profile": True, "profile_calls": 10}


def _validate(section: dict) -> None:
    kernels = schemas.load("report")["$defs"]["case"]["properties"]["kernels"]
    jsonschema.validate(section, kernels)


def _dispatches() -> list[str]:
    """The dispatch functions of a real compile of ln_linear_gelu for sm_80."""
    stats = profile.compile_statistics(STATISTICS.read_text())
    return [d["name"] for d in stats["dispatches"]]


# --- nsys stats' table ---------------------------------------------------------------------

def test_nsys_table_rows_in_ms_with_quoted_names():
    rows = gpu_kernels.nsys_kernel_rows(TABLE.read_text())
    assert [(r["name"], r["count"]) for r in rows] == [
        (MATMUL_KERNEL, 10), ("main_async_dispatch_0_reduction_128x256_f32", 10),
        ("main_async_dispatch_1_reduction_128x256_f32", 10), (SPLIT_K, 10)]
    assert rows[0]["total_ms"] == pytest.approx(0.10144)
    assert (rows[0]["min_ms"], rows[0]["max_ms"]) == (pytest.approx(0.01008),
                                                      pytest.approx(0.010304))
    # --timeunit=usec: the unit the headers name, the same times.
    usec = gpu_kernels.nsys_kernel_rows((DATA / "ln_linear_gelu.cuda_gpu_kern_sum.usec.csv")
                                        .read_text())
    assert [r["name"] for r in usec] == [r["name"] for r in rows]
    for a, b in zip(usec, rows, strict=True):
        assert a["total_ms"] == pytest.approx(b["total_ms"])


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    # nsys before 2021.5 (gpukernsum): other columns, no unit in the headers.
    ('"Time(%)","Total Time","Instances","Average","Minimum","Maximum","Name"\n'
     '100.0,5,1,5.0,5,5,"k"\n', "expected nsys stats' cuda_gpu_kern_sum columns"),
    ('"Time (%)","Total Time (ns)","Instances","Min (us)","Max (us)","Name"\n',
     "times in one unit"),
    (TABLE.read_text().replace("101440,10,", "-1,10,"), "line 2: Total Time: '-1'"),
    (TABLE.read_text().replace("101440,10,", "101440,ten,"), "line 2: invalid literal"),
    (TABLE.read_text() + "1.0,2\n", "line 6: 2 fields; expected 9"),
    (TABLE.read_text().replace(f'"{MATMUL_KERNEL}"', '""'), "expected a count of at least 0"),
])
def test_what_is_not_the_table_is_one_error_naming_it(text, words):
    with pytest.raises(ValueError) as info:
        gpu_kernels.nsys_kernel_rows(text)
    assert words in str(info.value)


# --- the join to the dispatch functions -----------------------------------------------------

def test_kernels_join_the_compiles_dispatches_and_the_rest_is_kept_as_such():
    kernels = gpu_kernels.nsys_kernel_rows(TABLE.read_text())
    rows = gpu_kernels.join_dispatches(kernels, _dispatches())
    assert [r["name"] for r in rows] == [
        MATMUL, "main$async_dispatch_0_reduction_128x256_f32",
        "main$async_dispatch_1_reduction_128x256_f32", gpu_kernels.UNMATCHED + SPLIT_K]
    # No time dropped: the rows keep the table's total; shares of it, largest first.
    assert sum(r["total_ms"] for r in rows) == pytest.approx(sum(k["total_ms"] for k in kernels))
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert rows[0]["share"] == pytest.approx(101440 / 171520)
    assert rows[0]["mean_ms"] == pytest.approx(0.010144) and rows[0]["workgroup"] is None
    assert gpu_kernels.kernel_name(MATMUL) == MATMUL_KERNEL
    # Without the compile's list, IREE's naming of dispatch functions decides alike, and
    # the rows keep the kernels' names.
    unlisted = gpu_kernels.join_dispatches(kernels)
    assert [r["name"] for r in unlisted] == [
        MATMUL_KERNEL, "main_async_dispatch_0_reduction_128x256_f32",
        "main_async_dispatch_1_reduction_128x256_f32", gpu_kernels.UNMATCHED + SPLIT_K]
    assert [r["total_ms"] for r in unlisted] == [r["total_ms"] for r in rows]
    # A kernel of a dispatch function the list lacks is not one of this module's calls.
    names = [r["name"] for r in gpu_kernels.join_dispatches(kernels, _dispatches()[:2])]
    assert gpu_kernels.UNMATCHED + MATMUL_KERNEL in names


def test_a_kernel_listed_twice_is_one_row():
    k = {"name": MATMUL_KERNEL, "count": 10, "total_ms": 1.0, "min_ms": 0.1, "max_ms": 0.1}
    rows = gpu_kernels.join_dispatches(
        [k, {**k, "count": 5, "total_ms": 0.75, "min_ms": 0.05, "max_ms": 0.2}], [MATMUL])
    assert [(r["count"], r["total_ms"], r["min_ms"], r["max_ms"]) for r in rows] == [
        (15, 1.75, 0.05, 0.2)]


def test_the_gpu_invocation_is_the_profiling_one_without_hal_profiling():
    argv = ["ibm", "--module=m.vmfb", "--function=main", "--device=cuda", "--input=1xf32=1",
            "--benchmark_repetitions=5", "--benchmark_min_time=0.05s",
            "--benchmark_format=json"]
    assert profile.profile_argv(argv, None, iterations=7, mode=None) == [
        "ibm", "--module=m.vmfb", "--function=main", "--device=cuda", "--input=1xf32=1",
        "--benchmark_format=json", "--benchmark_repetitions=1",
        "--benchmark_min_warmup_time=0", "--benchmark_min_time=7x"]
    assert gpu_kernels.cuda_device(argv) and gpu_kernels.cuda_device(["--device=cuda://0"])
    assert not gpu_kernels.cuda_device(["--device=local-task"])
    assert not gpu_kernels.cuda_device(["--device=cudaish"])


# --- wired: profiled_kernels on a CUDA device ------------------------------------------------

def _cuda_argv(tmp_path: Path) -> list[str]:
    """The timing's argv of a CUDA SKU, as the run stage builds it."""
    sku = {"iree": {"device": "cuda", "task_topology_max_group_count": None}}
    return benchmark_argv("/opt/iree/bin/iree-benchmark-module", str(tmp_path / "module.vmfb"),
                          "main", ["128x256xf32=@arg0.bin"], sku, repetitions=5,
                          warmup_s=0.1, min_time="0.05s")


@pytest.fixture
def fake_nsys(tmp_path, monkeypatch) -> Path:
    """The stand-in nsys first on PATH (and nothing else there: a real one is not found
    behind it); returns the directory it records its arguments in."""
    bin_dir, seen = tmp_path / "bin", tmp_path / "seen"
    bin_dir.mkdir()
    seen.mkdir()
    shutil.copy(DATA / "nsys", bin_dir / "nsys")
    os.chmod(bin_dir / "nsys", 0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_NSYS_DIR", str(seen))
    monkeypatch.setenv("FAKE_NSYS_TABLE", str(TABLE))
    return seen


@pytest.mark.tool
def test_a_cuda_case_is_profiled_under_nsys_and_joined(fake_nsys, tmp_path):
    argv = _cuda_argv(tmp_path)
    section = profiled_kernels(argv, M, 60, str(tmp_path / "log"), dispatches=_dispatches())
    _validate(section)
    assert (section["source"], section["mode"], section["calls"], section["error"]) == (
        "nsys", "cuda-kernels", 10, None)
    assert [r["name"] for r in section["rows"]][0] == MATMUL
    assert section["rows"][-1]["name"] == gpu_kernels.UNMATCHED + SPLIT_K
    assert section["total_ms"] == pytest.approx(0.17152) and section["seconds"] >= 0
    # nsys traced the case's own profiling invocation: its module, inputs and device, 10
    # calls without warm-up, no HAL profiling flags (the CUDA driver refuses them).
    recorded = (fake_nsys / "profile.argv").read_text().splitlines()
    start = recorded.index(argv[0])
    assert recorded[:start] == ["--trace=cuda", "--cuda-graph-trace=node", "--sample=none",
                                "--cpuctxsw=none", recorded[4], "--force-overwrite=true"]
    assert recorded[4].startswith("--output=") and recorded[4].endswith("/profile")
    assert recorded[start:] == [
        argv[0], f"--module={tmp_path / 'module.vmfb'}", "--function=main", "--device=cuda",
        "--input=128x256xf32=@arg0.bin", "--benchmark_format=json",
        "--benchmark_repetitions=1", "--benchmark_min_warmup_time=0",
        "--benchmark_min_time=10x"]
    assert "nsys stats --report=cuda_gpu_kern_sum" in (tmp_path / "log").read_text()


@pytest.mark.tool
def test_nsys_failing_or_finding_no_kernel_is_the_sections_error(fake_nsys, tmp_path,
                                                                 monkeypatch):
    argv = _cuda_argv(tmp_path)
    monkeypatch.delenv("FAKE_NSYS_TABLE")
    section = profiled_kernels(argv, M, 60, str(tmp_path / "log"))
    _validate(section)
    assert section["rows"] == [] and section["source"] == "nsys"
    assert "nsys recorded no CUDA kernel" in section["error"]
    monkeypatch.setenv("FAKE_NSYS_FAIL", "1")
    section = profiled_kernels(argv, M, 60, str(tmp_path / "log"))
    assert "nsys exited with 1" in section["error"] and "UNAVAILABLE" in section["error"]


def test_without_a_gpu_timing_tool_the_error_names_those_looked_for(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there
    section = profiled_kernels(_cuda_argv(tmp_path), M, 60, str(tmp_path / "log"))
    _validate(section)
    assert section["rows"] == [] and section["calls"] == 10
    assert section["error"].startswith("no per-kernel GPU timing tool found: looked for nsys")


# --- torch on CUDA: kernels and the ops that launched them ---------------------------------

def _event(id_, name, *, device="CPU", us=0.0, linked=0, annotation=False, count=1):
    """A FunctionEvent of prof.events() as far as kernel_rows reads it."""
    import torch

    return SimpleNamespace(id=id_, name=name, key=name, count=count, is_async=False,
                           device_type=getattr(torch.autograd.DeviceType, device),
                           linked_correlation_id=linked, is_user_annotation=annotation,
                           self_device_time_total=us, self_cpu_time_total=0.0)


def test_cuda_rows_are_kernels_with_the_ops_that_launched_them():
    gemm = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3"
    events = []
    for call in range(2):  # two profiled calls
        base = 100 * call
        events += [
            _event(base + 1, "aten::linear"),
            _event(base + 2, "aten::addmm"),  # linear's addmm launched the gemm
            _event(base + 3, "aten::mm"),
            _event(base + 4, "cudaLaunchKernel", linked=base + 2),  # the runtime call
            _event(base + 50, gemm, device="CUDA", us=40.0, linked=base + 2),
            _event(base + 51, gemm, device="CUDA", us=10.0, linked=base + 3),
            _event(base + 52, "triton_poi_fused_gelu_0", device="CUDA", us=5.0,
                   linked=base + 99),  # its op is not in the profile
            _event(base + 53, "## Call CompiledFxGraph ##", device="CUDA", us=60.0,
                   annotation=True),
            _event(base + 54, "Memset (Device)", device="CUDA", us=1.0)]
    rows = kernel_rows(events)
    assert [(r["name"], r["count"], r["total_ms"], r["op"]) for r in rows] == [
        (gemm, 4, pytest.approx(0.1), "aten::addmm, aten::mm"),
        ("triton_poi_fused_gelu_0", 2, pytest.approx(0.01), None),
        ("Memset (Device)", 2, pytest.approx(0.002), None)]
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert rows[0]["mean_ms"] == pytest.approx(0.025)
    section = kernels_section(source="torch.profiler", mode="cuda-kernels", calls=2,
                              rows=rows, seconds=0.1)
    _validate(section)
    assert section["rows"][0]["op"] == "aten::addmm, aten::mm"
    # The CPU's rows are ops, and carry no `op` field.
    cpu = kernels_section(source="torch.profiler", mode="cpu", calls=2, seconds=0.1,
                          rows=op_rows([SimpleNamespace(**{**vars(_event(1, "aten::mm")),
                                                           "self_cpu_time_total": 5.0})]))
    assert cpu["rows"] == [{"name": "aten::mm", "count": 1, "total_ms": 0.005,
                            "mean_ms": 0.005, "share": 1.0, "workgroup": None}]


def test_a_cuda_profile_records_kernel_rows(monkeypatch):
    """profile_ops on CUDA (no GPU here: torch.profiler.profile replaced by one that gives
    the events a CUDA profile would): the rows are kernels, the mode says so."""
    import torch

    seen = {}

    class Profile:
        def __init__(self, activities):
            seen["activities"] = activities

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def events(self):
            return [_event(1, "aten::mm"),
                    _event(2, "ampere_sgemm_32x32_sliced1x4_tn", device="CUDA", us=30.0,
                           linked=1)]

    monkeypatch.setattr(torch.profiler, "profile", Profile)
    calls = []
    section = profile_ops(lambda: calls.append(1), lambda: None, {**M, "profile_calls": 3},
                          cuda=True)
    _validate(section)
    assert seen["activities"][-1] == torch.profiler.ProfilerActivity.CUDA
    assert (section["source"], section["mode"], section["calls"]) == (
        "torch.profiler", "cuda-kernels", 3)
    assert len(calls) == 2 + 3  # the unprofiled warm-up calls, then the profiled ones
    assert section["rows"] == [{"name": "ampere_sgemm_32x32_sliced1x4_tn", "count": 1,
                                "total_ms": 0.03, "mean_ms": 0.03, "share": 1.0,
                                "workgroup": None, "op": "aten::mm"}]
