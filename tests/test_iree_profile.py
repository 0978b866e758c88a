"""Per-dispatch IREE profiles (workflow/backends/iree/profile.py): the profiling argv,
iree-profile's dispatch rows and iree-compile's CSV statistics, read from real outputs
captured with iree-base-runtime / iree-base-compiler 3.13 (tests/data/iree_profile/README)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import DATA
from workflow.backends.iree import profile
from workflow.backends.iree import tools as iree
from workflow.errors import StageError

PROFILES = DATA / "iree_profile"
LN_GELU = (PROFILES / "ln_linear_gelu.local-task.dispatch.jsonl").read_text()
LN_GELU_FUSED = (PROFILES / "ln_linear_gelu.aggressive-fusion.local-task.dispatch.jsonl"
                 ).read_text()
BLOCK = (PROFILES / "transformer_block.local-sync.dispatch.jsonl").read_text()
BLOCK_CSV = (PROFILES / "transformer_block.llvm-cpu.statistics.csv").read_text()
LN_GELU_CUDA_CSV = (PROFILES / "ln_linear_gelu.cuda-sm80.statistics.csv").read_text()


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _jsonl(objects: list[dict]) -> str:
    return "\n".join(json.dumps(o) for o in objects) + "\n"


# --- the profiling invocation -------------------------------------------------------------

CASE_ARGV = iree.benchmark_argv(
    "iree-benchmark-module", "m.vmfb", "main", ["4xf32=@a.bin"],
    {"iree": {"device": "local-task", "task_topology_max_group_count": 2}},
    repetitions=10, warmup_s=0.2, min_time="0.05s", extra_flags=["--parameters=p.irpa"])


def test_the_profiling_argv_is_the_cases_with_its_timing_flags_replaced():
    argv = profile.profile_argv(CASE_ARGV, "/tmp/x/p.ireeprof", iterations=4)
    # Module, function, device, inputs and a benchmark file's own flags: as the case's.
    for kept in ("--module=m.vmfb", "--function=main", "--device=local-task",
                 "--task_topology_max_group_count=2", "--input=4xf32=@a.bin",
                 "--parameters=p.irpa"):
        assert kept in argv
    timing = [a for a in argv if a.startswith(("--benchmark_rep", "--benchmark_min"))]
    assert timing == ["--benchmark_repetitions=1", "--benchmark_min_warmup_time=0",
                      "--benchmark_min_time=4x"]
    assert argv[-2:] == ["--device_profiling_mode=host-execution,executable-metadata",
                         "--device_profiling_output=/tmp/x/p.ireeprof"]


def test_the_profiling_argv_refuses_no_calls():
    with pytest.raises(ValueError, match="iterations"):
        profile.profile_argv(CASE_ARGV, "p.ireeprof", iterations=0)


# --- iree-profile dispatch rows -----------------------------------------------------------

def test_rows_of_a_real_profile_by_total_time_with_shares():
    rows = profile.dispatch_rows(LN_GELU)
    assert [r["name"] for r in rows] == [
        "main$async_dispatch_2_matmul_128x256x256_f32",
        "main$async_dispatch_0_reduction_128x256_f32",
        "main$async_dispatch_1_reduction_128x256_f32"]
    top = rows[0]
    # Captured with --benchmark_min_time=5x: 5 calls, one dispatch of each per call.
    assert [r["count"] for r in rows] == [5, 5, 5]
    assert top["total_ms"] == pytest.approx(1.542394)
    assert top["mean_ms"] == pytest.approx(1.542394 / 5)
    assert (top["min_ms"], top["max_ms"]) == pytest.approx((0.224411, 0.619021))
    assert top["workgroup"] == {"count": [16, 1, 1], "size": [1, 1, 1]}
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert top["share"] == pytest.approx(1.542394 / (1.542394 + 0.128713 + 0.115097))


def test_aggressive_fusion_merges_a_reduction_into_the_matmul_and_renumbers():
    # The fact compare's attribution is built on: --iree-dispatch-creation-enable-
    # aggressive-fusion on ln_linear_gelu (cpu-host) runs 2 dispatches where the default
    # runs 3. The matmul keeps its name but for the ordinal, which moves from 2 to 1.
    before = {r["name"] for r in profile.dispatch_rows(LN_GELU)}
    after = {r["name"] for r in profile.dispatch_rows(LN_GELU_FUSED)}
    assert before - after == {"main$async_dispatch_1_reduction_128x256_f32",
                              "main$async_dispatch_2_matmul_128x256x256_f32"}
    assert after - before == {"main$async_dispatch_1_matmul_128x256x256_f32"}


def test_device_timed_groups_win_over_host_timed_ones_and_names_merge():
    summary, *groups = _lines(LN_GELU)
    device = [{**g, "type": "dispatch_group", "total_ns": 1000, "valid": 1, "count": 1,
               "min_ns": 1000, "max_ns": 1000} for g in groups[:1]]
    rows = profile.dispatch_rows(_jsonl([summary, *groups, *device, *device]))
    assert len(rows) == 1  # the host rows are left out; the two device groups are one
    assert rows[0]["count"] == 2 and rows[0]["total_ms"] == pytest.approx(0.002)
    assert rows[0]["share"] == 1.0


def test_a_profile_without_dispatches_has_no_rows_and_no_time_no_share():
    summary, group, *_ = _lines(LN_GELU)
    assert profile.dispatch_rows(_jsonl([summary])) == []
    zero = {**group, "total_ns": 0, "min_ns": 0, "max_ns": 0}
    assert profile.dispatch_rows(_jsonl([summary, zero]))[0]["share"] is None


@pytest.mark.parametrize("text", [
    "", "not json\n", "[1, 2]\n", LN_GELU.splitlines()[1] + "\n",  # no summary row
])
def test_what_is_not_dispatch_output_is_a_value_error(text):
    with pytest.raises(ValueError):
        profile.dispatch_rows(text)


@pytest.mark.parametrize("key,value", [
    ("total_ns", -1), ("total_ns", "12"), ("min_ns", float("nan")), ("key", ""),
    ("count", 1.5), ("valid", True), ("last_workgroup_count", "16x1x1"),
])
def test_a_group_with_a_wrong_field_is_a_value_error(key, value):
    summary, group, *_ = _lines(LN_GELU)
    with pytest.raises(ValueError, match=key):
        profile.dispatch_rows(_jsonl([summary, {**group, key: value}]))


# --- iree-compile's CSV statistics (compile-only cases) -----------------------------------

def test_csv_statistics_count_as_the_json_ones_and_name_what_the_profile_times():
    stats = profile.compile_statistics(BLOCK_CSV)
    # The same compile's JSON statistics (the format the compile stage read before it
    # read the CSV one): its stream aggregates' counts, summed.
    aggregates = json.loads(
        (PROFILES / "transformer_block.llvm-cpu.statistics.json").read_text()).values()
    json_counts = {"dispatch_count": sum(a["execution"]["dispatch-count"] for a in aggregates),
                   "executable_count": sum(a["executable"]["executable-count"]
                                           for a in aggregates)}
    assert {k: stats[k] for k in json_counts} == json_counts == {
        "dispatch_count": 12, "executable_count": 12}
    # The initializer's dispatch (run once, when the module loads) is not a call's, and
    # the profile of calls never sees it; the other 11 are the profile's names.
    names = [d["name"] for d in profile.compile_statistics(BLOCK_CSV)["dispatches"]]
    assert len(names) == 11 and not any("initializer" in n for n in names)
    assert set(names) == {r["name"] for r in profile.dispatch_rows(BLOCK)}
    assert all(d["count"] == 1 for d in stats["dispatches"])


def test_a_cuda_compile_names_the_dispatches_a_cpu_profile_times():
    # Compiled for cuda sm_80 on a machine without a GPU: the same dispatch functions
    # as the llvm-cpu module's profile.
    assert [d["name"] for d in profile.compile_statistics(LN_GELU_CUDA_CSV)["dispatches"]] == [
        "main$async_dispatch_0_reduction_128x256_f32",
        "main$async_dispatch_1_reduction_128x256_f32",
        "main$async_dispatch_2_matmul_128x256x256_f32"]


@pytest.mark.parametrize("text", [
    "", "; comment only\n", '"Depth","Command"\n0\n',
    BLOCK_CSV.replace("2,262144,0,0,1,2,245760,0,0,12,0,12", "2,262144,0,0,1,2,245760,0,0,x,0,12"),
    BLOCK_CSV.replace("@main$async_dispatch_0::@main$async_dispatch_0_reduction_64x64_f32",
                      "@x::@"),
    # A field past the csv module's size limit (csv.Error, not a ValueError of its own).
    BLOCK_CSV.replace("_slow_memcpy", "x" * 200_000, 1),
])
def test_what_is_not_csv_statistics_is_a_value_error(text):
    with pytest.raises(ValueError):
        profile.compile_statistics(text)


# --- fuzz: a tool's bytes, whatever they are, parse or raise ValueError --------------------

FUZZ = settings(max_examples=150, deadline=5000, derandomize=True, database=None,
                print_blob=False, suppress_health_check=list(HealthCheck))
_REAL = [LN_GELU, LN_GELU_FUSED, BLOCK, BLOCK_CSV, LN_GELU_CUDA_CSV]
_VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
                    st.just(10 ** 400), st.lists(st.integers(), max_size=4),
                    st.just([[[[[]]]]]), st.dictionaries(st.text(max_size=4), st.integers()))


@st.composite
def mutated_outputs(draw) -> bytes:
    """A real output with one group's field given another value or deleted, or cut short
    with random bytes after; or random bytes."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.binary(max_size=200))
    lines = _lines(draw(st.sampled_from(_REAL[:3])))
    i = draw(st.integers(0, len(lines) - 1))
    key = draw(st.sampled_from(sorted(lines[i])))
    if draw(st.booleans()):
        del lines[i][key]
    else:
        lines[i][key] = draw(_VALUES)
    raw = _jsonl(lines).encode() if draw(st.booleans()) else draw(
        st.sampled_from(_REAL)).encode()
    cut = draw(st.integers(0, len(raw)))
    return raw[:cut] + draw(st.binary(max_size=8)) if draw(st.booleans()) else raw


@FUZZ
@example(raw=b"\xff\xfe" + LN_GELU.encode())
@example(raw=b'{"type": "dispatch_summary"}\n' + b"[" * 5000)
@given(raw=mutated_outputs())
@pytest.mark.slow
def test_a_tools_bytes_parse_or_raise_value_error(raw):
    text = raw.decode("utf-8", errors="replace")
    for parse in (profile.dispatch_rows, profile.compile_statistics):
        try:
            parse(text)
        except ValueError:
            pass


# --- on the installed tools ---------------------------------------------------------------

# Three matmuls of one shape, the last after a tanh: the compiler makes two dispatch
# functions and dispatches one of them twice per call, so counts differ by function.
TINY_MLIR = """\
func.func @main(%a: tensor<32x64xf32>, %b: tensor<64x64xf32>) -> tensor<32x64xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<32x64xf32>) -> tensor<32x64xf32>
  %m = linalg.matmul ins(%a, %b : tensor<32x64xf32>, tensor<64x64xf32>)
                     outs(%f : tensor<32x64xf32>) -> tensor<32x64xf32>
  %n = linalg.matmul ins(%m, %b : tensor<32x64xf32>, tensor<64x64xf32>)
                     outs(%f : tensor<32x64xf32>) -> tensor<32x64xf32>
  %t = math.tanh %n : tensor<32x64xf32>
  %k = linalg.matmul ins(%t, %b : tensor<32x64xf32>, tensor<64x64xf32>)
                     outs(%f : tensor<32x64xf32>) -> tensor<32x64xf32>
  return %k : tensor<32x64xf32>
}
"""
CPU_SKU = {"iree": {"target_backend": "llvm-cpu", "target_cpu": "generic",
                    "device": "local-sync"}}


@pytest.fixture(scope="module")
def tiny_module(tmp_path_factory):
    """A tiny module compiled for this CPU, and its compiler's CSV statistics."""
    from workflow.backends.proc import run_tool, tool_path

    tmp = tmp_path_factory.mktemp("profile")
    (tmp / "m.mlir").write_text(TINY_MLIR)
    stats = tmp / "stats.csv"
    run_tool([tool_path("iree-compile"), str(tmp / "m.mlir"), "--iree-input-type=auto",
              *iree.target_flags(CPU_SKU["iree"]), *iree.statistics_flags(str(stats)),
              "-o", str(tmp / "m.vmfb")], stage="compile", timeout=300)
    argv = iree.benchmark_argv(iree.benchmark_tool(), str(tmp / "m.vmfb"), "main",
                               ["32x64xf32=0.5", "64x64xf32=0.01"], CPU_SKU, repetitions=3,
                               warmup_s=0.1, min_time="0.01s")
    return argv, profile.compile_statistics(stats.read_text()), tmp


@pytest.mark.tool
def test_profile_case_times_every_dispatch_of_every_call(tiny_module, tmp_path):
    argv, stats, _ = tiny_module
    out = profile.profile_case(argv, timeout=120, log=str(tmp_path / "log"), iterations=4)
    rows = out["dispatches"]
    assert (out["tool"], out["mode"], out["iterations"]) == ("iree-profile", "host-execution", 4)
    assert 0 < out["seconds"] < 120
    # Every call runs each function as often as the compiler dispatches it (2 and 1).
    assert sorted(d["count"] for d in stats["dispatches"]) == [1, 2]
    assert {r["name"]: r["count"] for r in rows} == {
        d["name"]: 4 * d["count"] for d in stats["dispatches"]}
    assert all("dispatch" in r["name"] for r in rows)
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert [r["total_ms"] for r in rows] == sorted((r["total_ms"] for r in rows), reverse=True)
    assert not list(tmp_path.glob("*.ireeprof"))  # the bundle went to a temporary directory


@pytest.mark.tool
def test_a_profiling_mode_the_device_lacks_is_a_profile_stage_error(tiny_module, tmp_path):
    argv, _, _ = tiny_module
    # The local HAL has no device timestamps: iree-benchmark-module refuses the mode.
    with pytest.raises(StageError) as err:
        profile.profile_case(argv, timeout=120, mode="dispatch-events", workdir=tmp_path)
    assert err.value.stage == "profile"
    assert "dispatch-events" in err.value.message and "UNIMPLEMENTED" in err.value.message
