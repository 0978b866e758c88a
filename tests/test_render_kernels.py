"""Where a case's time goes, as every renderer reads it (issue 25): the kernels fixture is
what report.schema.json allows, common.top_kernels picks a case's largest kernels and
counts the rest, and the CSV and the dashboard JSON keep totals only (a report whose
cases carry kernels gives the same columns, rows and v3 records as without)."""

from __future__ import annotations

import copy

import jsonschema
import pytest

from tests.render_data import (
    GPU_CASE,
    PEAK,
    find,
    iree_kernels,
    iree_report,
    torch_report,
    with_kernels,
)
from workflow.records.report import report_schema
from workflow.render import common as c
from workflow.render import csv_report, dashboard

TB = "host/iree/linear-64x128x64-f32/baseline"  # carries transformer_block's capture


@pytest.mark.parametrize("which", [iree_report, torch_report])
def test_the_kernels_fixture_is_a_valid_report(which):
    report = with_kernels(which())
    jsonschema.Draft202012Validator(report_schema()).validate(report)
    for case in report["cases"]:
        block = case["kernels"]
        if block and block["calls"]:  # the shares of a timed profile sum to 1
            assert sum(r["share"] for r in block["rows"]) == pytest.approx(1.0)
            assert sum(r["total_ms"] for r in block["rows"]) == pytest.approx(block["total_ms"])


def test_top_kernels_keeps_the_largest_and_counts_the_rest():
    report = with_kernels(iree_report())
    top = c.top_kernels(find(report, TB), 3)
    assert [r["name"] for r in top.rows] == [
        "main$async_dispatch_5_attention_4x64x16x16x64",
        "main$async_dispatch_9_batch_matmul_1x64x256x64_f32",
        "main$async_dispatch_8_batch_matmul_1x64x256x64_f32"]
    # Three kept rows past the top three, and the record's "(5 others)".
    assert top.more == 3 + 5 and top.more_share == pytest.approx(
        1 - sum(r["share"] for r in top.rows))
    first = top.rows[0]
    assert first["ms_per_call"] == pytest.approx(first["total_ms"] / 3)  # 3 calls profiled
    assert first["per_call"] == 1.0
    assert c.kernel_text(first) == f"24.2 %, {first['total_ms'] / 3:.3g} ms per call, 1× per call"
    assert c.kernels_text(top) == ("iree-profile (host-execution), 3 calls, "
                                   f"{find(report, TB)['kernels']['total_ms'] / 3:.3g} ms per call")
    # All eleven kept: nothing more.
    whole = {**find(report, TB), "kernels": iree_kernels("transformer_block.local-sync", 3)}
    assert c.top_kernels(whole, 11).more == 0 and c.top_kernels(whole, 11).more_share is None
    assert c.top_kernels(find(report, "host/iree/linear-16x32x32-f32/baseline"), 3) is None


def test_compile_only_and_failed_profiles():
    report = with_kernels(iree_report())
    top = c.top_kernels(find(report, GPU_CASE), 3)
    assert top.compile_only and top.more_share is None and top.error is None
    assert [c.kernel_text(r) for r in top.rows] == ["1 dispatch site"] * 3
    assert c.kernels_text(top) == "iree-compile's dispatch list (compile-only: no times)"
    failed = c.top_kernels(find(report, "generic/iree/linear-64x32x32-f32/baseline"), 3)
    assert failed.rows == [] and failed.more == 0 and "UNIMPLEMENTED" in failed.error


def test_long_names_are_shortened_in_the_middle():
    name = "main$async_dispatch_12_" + "x" * 80 + "_matmul_like_Dx4096x4096_f16xf16xf32"
    short = c.short_name(name)
    assert len(short) == 72 and short.startswith("main$async_dispatch_12_")
    assert short.endswith("matmul_like_Dx4096x4096_f16xf16xf32") and "…" in short
    assert c.short_name("aten::addmm") == "aten::addmm"


@pytest.mark.parametrize("which", [iree_report, torch_report])
@pytest.mark.slow
def test_csv_and_dashboard_keep_totals_only(which):
    """Kernels add nothing to the CSV or the dashboard: the same text and records as the
    same report without them, and the records still valid v3 rows."""
    report = with_kernels(which())
    bare = copy.deepcopy(report)
    for case in bare["cases"]:
        case["kernels"] = None
    assert sum(x["kernels"] is not None for x in report["cases"]) >= 2
    assert csv_report.render(report, PEAK) == csv_report.render(bare, PEAK)
    records = dashboard.render(report, PEAK)
    assert records == dashboard.render(bare, PEAK)
    jsonschema.Draft202012Validator(dashboard.schema()).validate(records)
    text = repr(records) + csv_report.render(report, PEAK)
    assert "async_dispatch" not in text and "aten::" not in text
