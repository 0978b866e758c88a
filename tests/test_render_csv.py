"""results/report.csv: one row per case, torchao's columns first with torchao's names."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from tests.render_data import PEAK, find, iree_report, torch_report, with_training
from workflow.render import csv_report


def read(report: dict, peak=PEAK) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(csv_report.render(report, peak)))


def test_torchao_columns_first_then_ours_one_row_per_case():
    report = iree_report()
    df = read(report)
    assert list(df.columns[: len(csv_report.TORCHAO_COLUMNS)]) == list(csv_report.TORCHAO_COLUMNS)
    assert {"id", "sku", "backend", "median_ms", "ci95_lo_ms", "gflops", "percent_of_peak",
            "golden_verdict"} <= set(df.columns)
    assert len(df) == len(report["cases"])
    assert sorted(df["id"]) == sorted(c["id"] for c in report["cases"])


def test_gemm_columns_and_the_iree_case_as_the_compiled_time():
    df = read(iree_report()).set_index("id")
    row = df.loc["host/iree/linear-64x128x32-f32/baseline"]
    assert (row["m"], row["k"], row["n"]) == (64, 128, 32)
    assert row["quantization"] == "baseline" and row["model_type"] == "linear"
    assert row["high_precision_dtype"] == "torch.float32" and row["device"] == "cpu"
    # No torch-eager case in this suite: the eager columns are blank, the compiled
    # ones are this IREE case's own median, and compile vs baseline is 1 by definition.
    assert pd.isna(row["baseline_model_eager_inference_time_in_ms"])
    assert row["quantized_model_compiled_inference_time_in_ms"] == row["median_ms"]
    assert row["compile speedup on baseline"] == 1
    assert pd.isna(row["eager vs compile speedup"])
    histc = df.loc["host/iree/histc_model-f32/baseline"]
    assert pd.isna(histc["m"]) and histc["status"] == "failed" and histc["stage"] == "compile"
    assert pd.isna(histc["median_ms"]) and histc["error"].startswith("iree-compile exited")


def test_percent_of_peak_only_for_gemm_like_f32_with_a_peak():
    report = iree_report()
    df = read(report).set_index("id")
    case = find(report, "host/iree/linear-64x128x64-f32/baseline")
    assert abs(df.loc[case["id"], "percent_of_peak"]
               - 100 * case["throughput"]["gflops"] / PEAK["gflops"]) < 1e-4
    assert read(report, peak=None)["percent_of_peak"].isna().all()
    assert pd.isna(df.loc["host/iree/histc_model-f32/baseline", "percent_of_peak"])


def test_integer_columns_stay_integers():
    text = csv_report.render(iree_report(), PEAK)
    row = next(line for line in text.splitlines()
               if "host/iree/linear-64x128x32-f32/baseline" in line)
    assert row.startswith("linear-64x128x32-f32,baseline,,64,128,32,")


def test_training_rows_fill_the_training_columns_never_torchaos_inference_ones():
    report = with_training(torch_report())
    df = read(report).set_index("id")
    n = len(csv_report.TORCHAO_COLUMNS)
    assert list(df.columns[n: n + len(csv_report.TRAINING_COLUMNS)]) == \
        list(csv_report.TRAINING_COLUMNS)  # right after torchao's
    inference_names = list(csv_report.TRAINING_NAMES)
    training, inference = df[df["mode"] == "training"], df[df["mode"] == "inference"]
    assert len(training) == 4 and len(inference) == len(torch_report()["cases"])
    assert training[inference_names].isna().all().all()
    assert inference[list(csv_report.TRAINING_COLUMNS)].isna().all().all()
    assert inference["baseline_model_eager_inference_time_in_ms"].notna().any()
    step = df.loc["host/torch-inductor/linear-64x64x64-f32-train/baseline"]
    eager = find(report, "host/torch-eager/linear-64x64x64-f32-train/baseline")
    assert step["baseline_model_eager_training_time_in_ms"] == \
        pytest.approx(eager["timing"]["median_ms"], rel=1e-5)
    assert step["quantized_model_compiled_training_time_in_ms"] == \
        pytest.approx(step["median_ms"], rel=1e-5)
    assert step["eager vs compile training speedup"] == pytest.approx(
        eager["timing"]["median_ms"] / step["median_ms"], rel=1e-4)
    assert step["torchao_speedups_basis"] == "cross-run"
    unsupported = df.loc["host/iree/linear-64x64x64-f32-train/baseline"]
    assert unsupported["error"] == "the IREE backend benchmarks inference only"
