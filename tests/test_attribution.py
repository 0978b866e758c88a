"""Attribution of a case's change to dispatches / ops (workflow/stats/attribution.py) and
the provenance diff beside it (workflow/records/provenance_diff.py): pure functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from workflow.backends.iree.profile import dispatch_rows
from workflow.records.provenance_diff import flags_diff, parse_flags, provenance_diff
from workflow.stats.attribution import (
    ADDED,
    MATCHED,
    OTHER,
    REMOVED,
    RENAMED,
    RESHAPED,
    attribute,
    row_line,
    strip_ordinal,
    strip_shape,
    summary_line,
    summary_lines,
)

DATA = Path(__file__).parent / "data" / "iree_profile"


def iree(name: str, total_ms: float, count: int = 10) -> dict:
    """A dispatch row as an IREE case records it (mean and share are not read)."""
    return {"name": name, "count": count, "total_ms": total_ms,
            "mean_ms": total_ms / count, "share": None}


def by_name(a) -> dict:
    return {r.name: r for r in a.rows}


# Captured here (iree-base-compiler/runtime 3.13.0, llvm-cpu host, local-sync):
# ln_linear_gelu-128x256x256-f32 compiled with the default flags and with
# --iree-dispatch-creation-enable-aggressive-fusion=true, one `iree-benchmark-module
# --device_profiling_mode=host-execution,executable-metadata` invocation of 20 calls each,
# `iree-profile dispatch --format=jsonl`: (key, count, total_ns); and the benchmark's
# real_time per call. Aggressive fusion merges the layer norm's two reductions into one.
LN_DEFAULT = [("main$async_dispatch_0_reduction_128x256_f32", 20, 321406),
              ("main$async_dispatch_1_reduction_128x256_f32", 20, 374934),
              ("main$async_dispatch_2_matmul_128x256x256_f32", 20, 12292530)]
LN_DEFAULT_MS = 0.678
LN_AGGRESSIVE = [("main$async_dispatch_0_reduction_128x256_f32", 20, 725443),
                 ("main$async_dispatch_1_matmul_128x256x256_f32", 20, 17277379)]
LN_AGGRESSIVE_MS = 0.928


def captured(rows):
    return [iree(name, ns / 1e6, count) for name, count, ns in rows]


def test_captured_fusion_change_names_the_merged_reduction_and_follows_the_shifted_matmul():
    a = attribute(captured(LN_DEFAULT), captured(LN_AGGRESSIVE), LN_DEFAULT_MS,
                  LN_AGGRESSIVE_MS)
    rows = by_name(a)
    assert a.removed == ("main$async_dispatch_1_reduction_128x256_f32",)
    assert a.added == ()
    matmul = rows["main$async_dispatch_1_matmul_128x256x256_f32"]
    assert matmul.kind == RENAMED
    assert matmul.base_name == "main$async_dispatch_2_matmul_128x256x256_f32"
    assert rows["main$async_dispatch_0_reduction_128x256_f32"].kind == MATCHED
    assert a.rows[0] is matmul  # the largest change comes first
    # Each side's rows sum to its median, so the rows' changes explain all of it.
    assert sum(r.explains for r in a.rows) == pytest.approx(1.0)
    assert sum(r.base_ms or 0 for r in a.rows) == pytest.approx(LN_DEFAULT_MS)
    line = summary_line(a)
    assert line.startswith("+") and "main$async_dispatch_1_matmul_128x256x256_f32 (was " \
        "dispatch_2) explains" in line
    assert summary_lines(a)[-1] == "removed: main$async_dispatch_1_reduction_128x256_f32"


def test_profiles_read_by_the_iree_profile_parser_split_the_reduction_again():
    # tests/data/iree_profile (its README): the same two compiles on local-task, 5 calls
    # each, read as an IREE case reads them. Each side's median is taken as its profiled
    # time per call, which the files alone give.
    def side(variant):
        text = (DATA / f"ln_linear_gelu.{variant}dispatch.jsonl").read_text()
        rows = dispatch_rows(text)
        return rows, sum(r["total_ms"] for r in rows) / rows[0]["count"]

    (base, base_ms), (new, new_ms) = side("aggressive-fusion.local-task."), side("local-task.")
    a = attribute(base, new, base_ms, new_ms)
    assert a.added == ("main$async_dispatch_1_reduction_128x256_f32",)
    assert a.removed == ()
    matmul = by_name(a)["main$async_dispatch_2_matmul_128x256x256_f32"]
    assert (matmul.kind, matmul.base_name) == (
        RENAMED, "main$async_dispatch_1_matmul_128x256x256_f32")
    assert matmul.base_ms == pytest.approx(2.267183 / 5)
    assert summary_lines(a)[-1] == "added: main$async_dispatch_1_reduction_128x256_f32"


def test_a_split_fused_dispatch_is_removed_and_both_parts_added():
    # One matmul with its gelu fused (a generic contraction, `matmul_like`) becomes a
    # plain matmul and an elementwise dispatch; the dispatch after them shifts ordinal.
    base = [iree("main$async_dispatch_0_reduction_64x512_f32", 1.0),
            iree("main$async_dispatch_1_matmul_like_64x256x512_f32", 20.0),
            iree("main$async_dispatch_2_matmul_64x256x256_f32", 9.0)]
    new = [iree("main$async_dispatch_0_reduction_64x512_f32", 1.0),
           iree("main$async_dispatch_1_matmul_64x256x512_f32", 18.0),
           iree("main$async_dispatch_2_elementwise_64x256_f32", 6.0),
           iree("main$async_dispatch_3_matmul_64x256x256_f32", 9.0)]
    a = attribute(base, new, 3.0, 3.4)
    assert a.removed == ("main$async_dispatch_1_matmul_like_64x256x512_f32",)
    assert a.added == ("main$async_dispatch_1_matmul_64x256x512_f32",
                       "main$async_dispatch_2_elementwise_64x256_f32")
    rows = by_name(a)
    assert rows["main$async_dispatch_3_matmul_64x256x256_f32"].kind == RENAMED
    removed = rows["main$async_dispatch_1_matmul_like_64x256x512_f32"]
    assert removed.kind == REMOVED and removed.new_ms is None
    assert removed.delta_ms == pytest.approx(-2.0)  # 20 of 30 profiled ms of 3.0 ms
    elementwise = rows["main$async_dispatch_2_elementwise_64x256_f32"]
    assert elementwise.kind == ADDED and elementwise.base_ms is None
    assert elementwise.new_ms == pytest.approx(0.6)  # 6 of 34 profiled ms of 3.4 ms
    assert row_line(removed).startswith("-2 ms (removed) main$async_dispatch_1_matmul_like")
    assert summary_lines(a)[-1] == (
        "added: main$async_dispatch_1_matmul_64x256x512_f32, "
        "main$async_dispatch_2_elementwise_64x256_f32; "
        "removed: main$async_dispatch_1_matmul_like_64x256x512_f32")


def test_a_growing_matmul_explains_the_change_whatever_each_side_profiled():
    # The base profile called the function 10 times, the new one 20: only shares count.
    base = [iree("main$async_dispatch_0_reduction_64x512_f32", 1.0),
            iree("main$async_dispatch_1_matmul_64x256x512_f32", 29.0),
            iree("main$async_dispatch_2_elementwise_64x256_f32", 2.0)]
    new = [iree("main$async_dispatch_0_reduction_64x512_f32", 2.0, 20),
           iree("main$async_dispatch_1_matmul_64x256x512_f32", 94.0, 20),
           iree("main$async_dispatch_2_elementwise_64x256_f32", 4.0, 20)]
    a = attribute(base, new, 3.2, 5.0)
    top = a.rows[0]
    assert (top.base_ms, top.new_ms) == (pytest.approx(2.9), pytest.approx(4.7))
    assert (top.base_share, top.new_share) == (pytest.approx(29 / 32), pytest.approx(0.94))
    assert summary_line(a) == ("+1.8 ms (+62 %) main$async_dispatch_1_matmul_64x256x512_f32 "
                               "explains 100 % of the change")


def test_a_matmul_whose_layer_grew_is_matched_across_its_new_shape():
    base = [iree("main$async_dispatch_0_matmul_64x256x512_f32", 30.0),
            iree("main$async_dispatch_1_elementwise_64x256_f32", 2.0)]
    new = [iree("main$async_dispatch_0_matmul_64x384x512_f32", 45.0),
           iree("main$async_dispatch_1_elementwise_64x384_f32", 3.0)]
    a = attribute(base, new, 3.2, 4.8)
    top = a.rows[0]
    assert top.kind == RESHAPED and top.explains == pytest.approx(1.5 / 1.6)
    assert "main$async_dispatch_0_matmul_64x384x512_f32 (was " \
        "dispatch_0_matmul_64x256x512_f32) explains 94 %" in summary_line(a)
    assert (a.added, a.removed) == ((), ())


def test_names_without_ordinal_and_shape():
    name = "main$async_dispatch_12_matmul_like_Dx256x512_f16"
    assert strip_ordinal(name) == "main$async_dispatch_matmul_like_Dx256x512_f16"
    assert strip_shape(name) == "main$async_dispatch_matmul_like_f16"
    assert strip_shape("aten::addmm") == "aten::addmm"


def test_torch_op_rows_name_the_ops_a_recipe_changed():
    # int8 weight-only quantization: addmm becomes the int8-packed matmul.
    base = [{"name": "aten::addmm", "calls": 20, "self_ms": 24.0, "share": 0.8},
            {"name": "aten::gelu", "calls": 10, "self_ms": 3.0, "share": 0.1},
            {"name": "aten::native_layer_norm", "calls": 10, "self_ms": 3.0, "share": 0.1}]
    new = [{"name": "aten::_weight_int8pack_mm", "calls": 20, "self_ms": 12.0, "share": 0.6},
           {"name": "aten::gelu", "calls": 10, "self_ms": 3.0, "share": 0.15},
           {"name": "aten::native_layer_norm", "calls": 10, "self_ms": 3.0, "share": 0.15},
           {"name": "aten::copy_", "calls": 20, "self_ms": 2.0, "share": 0.1}]
    a = attribute(base, new, 3.0, 2.0)
    assert a.removed == ("aten::addmm",) and set(a.added) == {"aten::_weight_int8pack_mm",
                                                              "aten::copy_"}
    assert [r.name for r in a.rows[:2]] == ["aten::addmm", "aten::_weight_int8pack_mm"]
    assert a.rows[0].explains == pytest.approx(2.4)  # -2.4 ms of a -1.0 ms change
    assert by_name(a)["aten::gelu"].delta_ms == pytest.approx(0.0)
    assert summary_line(a) == "-2.4 ms (removed) aten::addmm explains 240 % of the change"


@pytest.mark.parametrize("base, new, said", [
    ([], [iree("main$async_dispatch_0_matmul_64x256x512_f32", 1.0)],
     "no profile on the base side"),
    ([iree("main$async_dispatch_0_matmul_64x256x512_f32", 1.0)], [],
     "no profile on the new side"),
    ([], [], "no profile on either side"),
    ([iree("main$async_dispatch_0_matmul_64x256x512_f32", 0.0)],
     [iree("main$async_dispatch_0_matmul_64x256x512_f32", 1.0)],
     "no profile on the base side"),  # rows without time say nothing either
])
def test_a_side_without_profile_is_said(base, new, said):
    a = attribute(base, new, 1.0, 2.0)
    assert a.rows == () and summary_line(a) == said and summary_lines(a) == [said]


def test_a_change_within_noise_is_not_divided_among_the_rows():
    base = [iree("main$async_dispatch_0_matmul_64x256x512_f32", 9.0),
            iree("main$async_dispatch_1_elementwise_64x256_f32", 1.0)]
    new = [iree("main$async_dispatch_0_matmul_64x256x512_f32", 8.0),
           iree("main$async_dispatch_1_elementwise_64x256_f32", 2.0)]
    for a in (attribute(base, new, 1.0, 1.0),
              attribute(base, new, 1.0, 1.004, noise_ms=0.01)):
        assert a.within_noise and all(r.explains is None for r in a.rows)
        assert "within noise" in summary_line(a) and "explains" not in summary_line(a)
        assert summary_lines(a)[0].startswith(summary_line(a).split(";")[0])
    assert not attribute(base, new, 1.0, 1.02, noise_ms=0.01).within_noise


def test_many_tiny_rows_are_grouped_as_other():
    base = [iree("main$async_dispatch_0_matmul_64x256x512_f32", 50.0)]
    base += [iree(f"main$async_dispatch_{i}_elementwise_{i}x64_f32", 1.0) for i in range(1, 41)]
    new = [iree("main$async_dispatch_0_matmul_64x256x512_f32", 80.0)]
    new += [iree(f"main$async_dispatch_{i}_elementwise_{i}x64_f32", 1.0) for i in range(1, 41)]
    a = attribute(base, new, 9.0, 12.0, top=3)
    assert len(a.rows) == 4 and a.rows[-1].kind == OTHER and a.rows[-1].name == "38 others"
    assert sum(r.explains for r in a.rows) == pytest.approx(1.0)
    assert a.rows[0].name == "main$async_dispatch_0_matmul_64x256x512_f32"


def test_a_row_of_neither_shape_is_our_bug_in_one_line():
    with pytest.raises(ValueError, match=r"^new profile: row 0: no total_ms or self_ms; "
                                         r"expected an IREE dispatch row"):
        attribute([iree("main$async_dispatch_0_matmul_64x256x512_f32", 1.0)],
                  [{"name": "x", "ms": 1.0}], 1.0, 1.0)


def record(flags=None, compiler="3.13.0", **prov) -> dict:
    """A case record's fields provenance_diff reads (records/case.py's shape)."""
    return {"id": "host/iree/mlp-64x256x512-f32/baseline", "sku": "host", "device": "cpu",
            "compile": {"seconds": 1.0, "dispatch_count": 3, "binary_bytes": 1,
                        "flags": BASE_FLAGS if flags is None else flags,
                        "compiler_version": compiler},
            "provenance": {"host": "vm", "torch_threads": 2, "iree_device": "local-task",
                           "task_topology_max_group_count": 2,
                           "iree_runtime_version": "3.13.0", "load_avg": [[1.0, 1.0, 1.0]],
                           "started_at": "2026-11-23T23:35:53+00:00", "job_key": "a0", **prov}}


BASE_FLAGS = ["--iree-input-type=torch", "--iree-hal-target-device=local",
              "--iree-hal-local-target-device-backends=llvm-cpu",
              "--iree-llvmcpu-target-cpu=host"]
REPORT = {"git_sha": "abc", "versions": {"python": "3.11.7", "torch": "2.13.0+cpu",
                                         "torchao": "0.18.0", "snakemake": "9.27.1"},
          "host": {"name": "vm", "cpu_model": "AMD EPYC", "cores": 2}}

# (id, what differs on the new side, the lines provenance_diff gives)
CASES = [
    ("nothing", {}, []),
    ("flag-value", {"flags": [*BASE_FLAGS[:3], "--iree-llvmcpu-target-cpu=znver4"]},
     ["compile flags: --iree-llvmcpu-target-cpu=host -> znver4"]),
    ("flag-added-removed", {"flags": [*BASE_FLAGS[1:],
                                      "--iree-dispatch-creation-enable-aggressive-fusion"]},
     ["compile flags: + --iree-dispatch-creation-enable-aggressive-fusion; "
      "- --iree-input-type=torch"]),
    ("flag-order-only", {"flags": BASE_FLAGS[::-1]}, []),
    ("compiler", {"compiler": "3.14.0"}, ["iree-compile 3.13.0 -> 3.14.0"]),
    ("runtime-threads-host", {"iree_runtime_version": "3.14.0", "torch_threads": 4,
                              "host": "node7"},
     ["iree-runtime 3.13.0 -> 3.14.0", "host vm -> node7", "torch threads 2 -> 4"]),
    ("interpreter-torch", {"torch_version": "2.14.0"}, ["torch 2.13.0+cpu -> 2.14.0"]),
    ("builds-and-sources", {"builds": {"torch": "torch==2.13.0 record:1b2c"},
                            "model_sources": {"workflow/models/layers.py": "9f00"}},
     ["build torch: absent -> torch==2.13.0 record:1b2c",
      "model source workflow/models/layers.py: absent -> 9f00"]),
    ("transient-only", {"started_at": "2026-11-24T00:00:00+00:00", "job_key": "b1",
                        "load_avg": [[3.0, 2.0, 1.0]]}, []),
    ("unknown-key", {"benchmark_file": "bench/m.json"},
     ["provenance.benchmark_file none -> bench/m.json"]),
]


@pytest.mark.parametrize("change, lines", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_provenance_diff(change, lines):
    change = dict(change)
    flags, compiler = change.pop("flags", None), change.pop("compiler", "3.13.0")
    assert provenance_diff(record(), record(flags, compiler, **change),
                           base_report=REPORT, new_report=REPORT) == lines


def test_report_versions_host_and_commit_differ():
    new_report = {"git_sha": "def", "versions": {**REPORT["versions"], "torchao": "0.19.0",
                                                 "snakemake": "9.28.0"},
                  "host": {**REPORT["host"], "cpu_model": "Intel Xeon"}}
    assert provenance_diff(record(), record(), base_report=REPORT, new_report=new_report) == [
        "torchao 0.18.0 -> 0.19.0", "cpu AMD EPYC -> Intel Xeon", "benchflow commit abc -> def"]


def test_a_torch_case_is_not_told_about_iree_versions():
    base = {"backend": "torch-eager", "compile": None, "provenance": {"torch_threads": 2}}
    new_report = {"versions": {"iree-base-compiler": "3.14.0", "torch": "2.14.0"}}
    base_report = {"versions": {"iree-base-compiler": "3.13.0", "torch": "2.13.0"}}
    assert provenance_diff(base, dict(base), base_report=base_report,
                           new_report=new_report) == ["torch 2.13.0 -> 2.14.0"]


def test_a_torch_pairs_sides_differ_by_backend_and_recipe():
    """A torch A/B pair's sides (comparisons/ab_torch.torch_row_attribution): one workload,
    what differs is the backend or the recipe."""
    base = {"sku": "a", "backend": "torch-eager", "recipe": "baseline",
            "provenance": {"torch_threads": 1}}
    assert provenance_diff(base, {**base, "recipe": "int8wo"}) == ["recipe baseline -> int8wo"]
    assert provenance_diff(base, {**base, "backend": "torch-inductor"}) == [
        "backend torch-eager -> torch-inductor"]


def test_repeated_flags_keep_each_value():
    assert parse_flags(["--x=1", "--x=2", "--y"]) == {"--x": ["1", "2"], "--y": [None]}
    assert flags_diff(["--x=1", "--x=2"], ["--x=2", "--x=1"]) is None
    assert flags_diff(["--x=1"], ["--x=1", "--x=2"]) == "compile flags: --x=1 -> 1, 2"
