"""results/report.csv: one row per case. torchao's microbenchmark columns come first, with
their names, where they apply (blank where they do not); benchflow's own after them."""

from __future__ import annotations

import json

import pandas as pd

from workflow.render import common as c
from workflow.stats.speedup import CROSS_RUN

# torchao's BenchmarkConfig.to_dict() + BenchmarkResult.to_dict() keys, in their order
# (output_dir and the enable_* switches are torchao run settings with no meaning here).
TORCHAO_COLUMNS = (
    "name", "quantization", "sparsity", "m", "k", "n", "high_precision_dtype",
    "torch_compile_mode", "device", "model_type",
    "baseline_model_eager_inference_time_in_ms", "quantized_model_eager_inference_time_in_ms",
    "baseline_model_compiled_inference_time_in_ms",
    "quantized_model_compiled_inference_time_in_ms",
    "eager speedup on baseline", "compile speedup on baseline", "eager vs compile speedup",
    "profiler_json_path", "memory_profile_path", "memory_visualization_path", "memory_stats",
)

# torchao's times and speedups of a training row under benchflow's own names (torchao's
# microbenchmarks measure inference only, so a training step under one of its inference
# columns would read as a forward pass): these come after torchao's columns, and a row
# fills either torchao's seven or these seven, by its mode.
TRAINING_NAMES = {
    "baseline_model_eager_inference_time_in_ms": "baseline_model_eager_training_time_in_ms",
    "quantized_model_eager_inference_time_in_ms": "quantized_model_eager_training_time_in_ms",
    "baseline_model_compiled_inference_time_in_ms":
        "baseline_model_compiled_training_time_in_ms",
    "quantized_model_compiled_inference_time_in_ms":
        "quantized_model_compiled_training_time_in_ms",
    "eager speedup on baseline": "eager training speedup on baseline",
    "compile speedup on baseline": "compile training speedup on baseline",
    "eager vs compile speedup": "eager vs compile training speedup",
}
TRAINING_COLUMNS = tuple(TRAINING_NAMES.values())
SPEEDUPS = ("eager speedup on baseline", "compile speedup on baseline",
            "eager vs compile speedup")

# Our dtype names -> torch's, as torchao writes high_precision_dtype.
TORCH_DTYPES = {"f32": "torch.float32", "bf16": "torch.bfloat16", "f16": "torch.float16",
                "f64": "torch.float64"}


def times_columns(case: dict, index: c.Index) -> tuple[dict, dict]:
    """torchao's four times and three speedups of this case's SKU and workload: (under
    torchao's inference names, under TRAINING_NAMES), the side that is not the case's
    mode blank."""
    t = index.torchao_times(case)
    found = {
        "baseline_model_eager_inference_time_in_ms": t["baseline_eager"],
        "quantized_model_eager_inference_time_in_ms": t["quantized_eager"],
        "baseline_model_compiled_inference_time_in_ms": t["baseline_compiled"],
        "quantized_model_compiled_inference_time_in_ms": t["quantized_compiled"],
        "eager speedup on baseline": c.ratio(t["baseline_eager"], t["quantized_eager"]),
        "compile speedup on baseline": c.ratio(t["baseline_compiled"], t["quantized_compiled"]),
        "eager vs compile speedup": c.ratio(t["quantized_eager"], t["quantized_compiled"]),
    }
    training = case["mode"] == "training"
    return ({name: None if training else v for name, v in found.items()},
            {TRAINING_NAMES[name]: v if training else None for name, v in found.items()})


def torchao_columns(case: dict, index: c.Index) -> dict:
    mkn = c.gemm_mkn(case) or (None, None, None)
    inference, training = times_columns(case, index)
    profile = c.section(case, "profile")
    memory = c.section(case, "memory")
    return {
        "name": case.get("group") or case["workload"],
        "quantization": case["recipe"],
        "sparsity": None,
        "m": mkn[0], "k": mkn[1], "n": mkn[2],
        "high_precision_dtype": TORCH_DTYPES.get(case["dtype"], case["dtype"]),
        "torch_compile_mode": case.get("compile_mode"),
        "device": case.get("device"),
        "model_type": case["model"],
        **inference,
        "profiler_json_path": profile.get("trace"),
        "memory_profile_path": profile.get("memory_snapshot"),
        "memory_visualization_path": None,
        "memory_stats": json.dumps(memory, sort_keys=True) if memory else None,
        **training,
        # Ours, not torchao's: its three speedups (of either mode) are ratios of medians
        # of separately measured cases, and say so.
        "torchao_speedups_basis": (CROSS_RUN if any(
            inference[n] is not None or training[TRAINING_NAMES[n]] is not None
            for n in SPEEDUPS) else None),
    }


def basis_columns(case: dict, which: str) -> dict:
    """What speedup `which` is: its kind (cross-run or paired), the case it is compared
    with, when each side was measured (cross-run) and the 95 % interval (paired)."""
    basis = c.speedup_basis(case, which) or {}
    ci = basis.get("ci95") or [None, None]
    return {f"speedup_{which}_{key}": value for key, value in (
        ("basis", basis.get("kind")), ("base_id", basis.get("base_id")),
        ("base_measured_at", basis.get("base_measured_at")),
        ("case_measured_at", basis.get("case_measured_at")),
        ("ci95_lo", ci[0]), ("ci95_hi", ci[1]))}


def own_columns(case: dict, index: c.Index, peak: dict | None) -> dict:
    timing, comp = c.section(case, "timing"), c.section(case, "compile")
    thr, acc = c.section(case, "throughput"), c.section(case, "accuracy")
    graph, golden = c.section(case, "graph"), c.section(case, "golden")
    mem = c.section(case, "memory")
    ci = timing.get("ci95_ms") or [None, None]
    speedups = c.speedups(case)
    return {
        "id": case["id"], "model": case["model"], "config": case["config"],
        "dtype": case["dtype"], "shape": c.shape_text(case), "sku": case["sku"],
        "backend": case["backend"], "recipe": case["recipe"], "mode": case["mode"],
        "workload": case["workload"], "layers": case.get("layers"),
        "status": case["status"], "report_status": c.status(case), "stage": case.get("stage"),
        "error": c.error_summary(case.get("error")) or None,
        "compile_s": comp.get("seconds"), "dispatch_count": comp.get("dispatch_count"),
        "binary_bytes": comp.get("binary_bytes"),
        "median_ms": timing.get("median_ms"), "ci95_lo_ms": ci[0], "ci95_hi_ms": ci[1],
        "min_ms": timing.get("min_ms"), "p90_ms": timing.get("p90_ms"), "cv": timing.get("cv"),
        "invocations": timing.get("invocations"), "repetitions": timing.get("repetitions"),
        "first_run_ms": timing.get("first_run_ms"), "noisy": timing.get("noisy"),
        "disturbed": c.disturbed(case) if timing else None,
        "disturbance_reason": c.disturbance_reason(case) if c.disturbed(case) else None,
        "measured_at": timing.get("measured_at"),
        "eager_ms": index.eager_ms(case),
        "speedup_vs_eager": speedups["vs_eager"],
        "speedup_vs_baseline": speedups["vs_baseline"],
        **basis_columns(case, "vs_eager"), **basis_columns(case, "vs_baseline"),
        "items_per_s": thr.get("items_per_s"), "gflops": thr.get("gflops"),
        "percent_of_peak": c.percent_of_peak(case, peak),
        "peak_bytes": mem.get("peak_bytes"), "memory_kind": mem.get("kind"),
        "pcc": acc.get("pcc"), "max_abs_err": acc.get("max_abs_err"),
        "max_rel_err": acc.get("max_rel_err"), "allclose": acc.get("allclose"),
        "sqnr_db": acc.get("sqnr_db"), "accurate": acc.get("accurate"),
        "min_pcc": acc.get("min_pcc"), "accuracy_metric": acc.get("metric"),
        "min_sqnr_db": acc.get("min_sqnr_db"), "sqnr_reference": acc.get("sqnr_reference"),
        "aten_ops": graph.get("aten_ops"), "aten_ops_unique": graph.get("aten_ops_unique"),
        "graph_breaks": graph.get("graph_breaks"), "graph_count": graph.get("graph_count"),
        "golden_verdict": golden.get("verdict"), "golden_ms": golden.get("value_ms"),
        "golden_ratio": golden.get("ratio"), "golden_p_value": golden.get("p_value"),
        # golden_ratio is to the run's level where one was taken out (regression/drift.py).
        "golden_level": (golden.get("drift") or {}).get("factor"),
        "dispatch_verdict": golden.get("dispatch_verdict"),
        "size_verdict": golden.get("size_verdict"),
        # Sections not measured and why (a compile-only case: timing, memory, accuracy).
        "timing_not_measured": c.not_measured(case, "timing"),
        "accuracy_not_measured": c.not_measured(case, "accuracy"),
    }


def frame(report: dict, peak: dict | None = None) -> pd.DataFrame:
    cases = report["cases"]
    index = c.Index.of(cases)
    rows = [{**torchao_columns(x, index), **own_columns(x, index, peak)}
            for x in c.ordered(cases)]
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=list(TORCHAO_COLUMNS))
    # Integer columns with blanks stay integers (not 16.0) in the file.
    for col in ("m", "k", "n", "layers", "dispatch_count", "binary_bytes", "invocations",
                "repetitions", "peak_bytes", "aten_ops", "aten_ops_unique", "graph_breaks",
                "graph_count"):
        df[col] = df[col].astype("Int64")
    return df


def render(report: dict, peak: dict | None = None) -> str:
    return frame(report, peak).to_csv(index=False, float_format="%.6g", lineterminator="\n")
