"""Ratios and units are right: speedups, GFLOP/s and percent of peak recomputed from the
raw timings (the invocation medians) and the shapes, against what the reports show."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from tests.render_data import (
    PEAK,
    find,
    iree_report,
    median_of_invocations,
    torch_report,
    with_synthetic_verdicts,
)
from workflow.backends import peak
from workflow.render import common as c
from workflow.render import csv_report


def csv_rows(report: dict, peak_info=PEAK) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(csv_report.render(report, peak_info))).set_index("id")


@pytest.mark.parametrize("case_id", [
    "host/iree/linear-16x32x32-f32/baseline",
    "host/iree/linear-64x128x64-f32/baseline",
    "generic/iree/linear-16x128x32-f32/baseline",  # a noisy case, measured twice as often
])
def test_gflops_from_the_shape_and_the_invocation_medians(case_id):
    report = iree_report()
    case = find(report, case_id)
    m, k, n = c.gemm_mkn(case)
    median_ms = median_of_invocations(case)
    assert case["timing"]["median_ms"] == pytest.approx(median_ms, rel=1e-12)
    gflops = 2 * m * k * n / (median_ms / 1e3) / 1e9  # a linear layer: 2MKN flops
    row = csv_rows(report).loc[case_id]
    assert row["gflops"] == pytest.approx(gflops, rel=1e-5)  # the CSV keeps 6 digits
    assert row["percent_of_peak"] == pytest.approx(100 * gflops / PEAK["gflops"], rel=1e-5)
    assert row["items_per_s"] == pytest.approx(1e3 / median_ms, rel=1e-5)


def torch_pairs(report: dict):
    """(compiled case, its eager sibling, its baseline sibling) of every timed case whose
    siblings were timed too."""
    by_key = {(x["sku"], x["backend"], x["workload"], x["recipe"]): x for x in report["cases"]}
    for x in report["cases"]:
        if x["backend"] == c.EAGER or x["recipe"] == c.BASELINE or c.median_ms(x) is None:
            continue
        eager = by_key.get((x["sku"], c.EAGER, x["workload"], x["recipe"]))
        base = by_key.get((x["sku"], x["backend"], x["workload"], c.BASELINE))
        if eager and base and c.median_ms(eager) and c.median_ms(base):
            yield x, eager, base


def test_speedups_from_the_invocation_medians():
    report = torch_report()
    rows = csv_rows(report)
    pairs = list(torch_pairs(report))
    assert len(pairs) >= 2
    for case, eager, base in pairs:
        mine = median_of_invocations(case)
        vs_eager = median_of_invocations(eager) / mine
        vs_baseline = median_of_invocations(base) / mine
        row = rows.loc[case["id"]]
        assert row["speedup_vs_eager"] == pytest.approx(vs_eager, rel=1e-5)
        assert row["speedup_vs_baseline"] == pytest.approx(vs_baseline, rel=1e-5)
        # torchao's names for the same ratios: compiled quantized vs compiled baseline,
        # and eager quantized vs compiled quantized.
        assert row["compile speedup on baseline"] == pytest.approx(vs_baseline, rel=1e-5)
        assert row["eager vs compile speedup"] == pytest.approx(vs_eager, rel=1e-5)
        eager_base = find(report, eager["id"].replace(f"/{eager['recipe']}", "/baseline"))
        assert row["eager speedup on baseline"] == pytest.approx(
            median_of_invocations(eager_base) / median_of_invocations(eager), rel=1e-5)
        assert row["eager_ms"] == pytest.approx(median_of_invocations(eager), rel=1e-5)


@pytest.mark.slow
def test_every_format_shows_the_records_own_speedups():
    """Renderers read the speedup section fill_speedups wrote at aggregation; they do not
    recompute it from the siblings (a changed record value shows, a missing one stays
    blank)."""
    from workflow.render import dashboard, html, markdown

    report = torch_report()
    case, _, _ = next(torch_pairs(report))
    case["speedup"] = {"vs_eager": 123.456, "vs_baseline": None}
    row = csv_rows(report).loc[case["id"]]
    assert row["speedup_vs_eager"] == pytest.approx(123.456)
    assert pd.isna(row["speedup_vs_baseline"])
    metrics = {r["metric"]["name"]: r["metric"]["benchmark_values"]
               for r in dashboard.render(report, PEAK)
               if r["benchmark"]["extra_info"]["case_id"] == case["id"]}
    assert metrics["speedup vs eager (x)"] == [pytest.approx(123.456)]
    assert "speedup vs baseline (x)" not in metrics
    assert "123×" in markdown.render(report)
    assert "123.5" in html.render(report, PEAK)


def test_status_classification():
    report = with_synthetic_verdicts(iree_report())
    statuses = {x["id"]: c.status(x) for x in report["cases"]}
    assert statuses["host/iree/histc_model-f32/baseline"] == "failed"
    synthetic = [x for x in report["cases"] if "synthetic" in x["provenance"]]
    assert [statuses[x["id"]] for x in synthetic] == ["degraded"] * 3
    assert c.counts(report["cases"]) == {"ok": 9, "degraded": 3, "failed": 2,
                                         "unsupported": 0, "skipped": 0, "compile-only": 0}


@pytest.mark.slow
def test_peak_is_the_best_measured_matmul():
    result = peak.measure(sizes=(64, 128), repeats=2, budget_s=0.01)
    rates = [g for lib in result["by_library"].values() for g in lib.values()]
    assert result["gflops"] == max(rates) > 0
    assert set(result["by_library"]["numpy"]) == {"64", "128"}
    assert result["dtype"] == "f32" and result["threads"] >= 1


def test_the_fixtures_are_reports_the_aggregation_would_write():
    from workflow.records.report import validate_report

    validate_report(iree_report())
    validate_report(torch_report())
