"""torchao microbenchmark CSVs (benchmarks/microbenchmarks/utils.py generate_results_csv:
one header of BenchmarkResult.to_dict's keys, one line per result). One CSV is one run.
No version wrote when it ran (only later file *names* hold a date, and a name is no
content), so a `timestamp` column is used where a file has one, else the caller's
--timestamp.

The column sets torchao's main branch wrote (`git log --first-parent main --
benchmarks/microbenchmarks/utils.py`), all read:
  6b76adbe (2025-03-17) name, quantization, m, k, n, high_precision_dtype,
           use_torch_compile, torch_compile_mode, device, model_type, output_dir,
           model_inference_time_in_ms                     (results/results.csv of 65d40650)
  3766ed7f + sparsity; 25034e55 + enable_profiler, profiler_json_path;
  e3db2b2c + enable_memory_profiler, memory_profile_path, memory_visualization_path,
           memory_stats
  8369268a (2025-05-07) + baseline_inference_time_in_ms, speedup
  317179ea (2025-08-12) use_torch_compile gone; baseline_model_eager_, quantized_model_
           eager_, baseline_model_compiled_, quantized_model_compiled_inference_time_in_ms,
           "eager speedup on baseline", "compile speedup on baseline",
           "eager vs compile speedup"
Units: before 8369268a ("Generate speedup for inference (#2151)") the column named
model_inference_time_in_ms held MICROseconds: model_inference_time_in_ms() returned
`Timer.timeit(100).mean * 1e6` ("Median inference time in microseconds", printed as
"Time (μs)"); #2151 made it `(res * 1e6) / 1000`. A file without #2151's columns is
therefore converted from µs to ms (metric extra_info says so). The value is the mean of
100 calls, so the metric is "latency mean (ms)", not benchflow's "latency median (ms)".
From 317179ea each line measures the quantized model eager and compiled: two cases
(compile "eager" and the torch_compile_mode), each with its speedup vs the baseline
recipe, the compiled one also vs eager (torchao: eager time / compiled time, benchflow's
"speedup vs eager (x)" direction). torchao initializes every result to 0.0, so a value
that is not positive was not measured and is left out.

Case id: torchao/<name>/<quantization>[+<sparsity>]/<m>x<k>x<n>/<device>/<compile>
(compile: the torch_compile_mode when compiled, else "eager"); lines with one case id
(the published results.csv measures int4wo-32 twice) are one row with every value."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from workflow.history.importers.run import case_id, make_run, need_time, problem, unix_time
from workflow.render import dashboard

SOURCE = "torchao-csv"
IDENTITY = ("name", "quantization", "m", "k", "n", "device")
OLD_TIME = "model_inference_time_in_ms"
# (time column, speedup vs baseline column, speedup vs eager column, compile?) per case
# a line of the 317179ea format holds.
DUAL = (("quantized_model_eager_inference_time_in_ms", "eager speedup on baseline",
         None, False),
        ("quantized_model_compiled_inference_time_in_ms", "compile speedup on baseline",
         "eager vs compile speedup", True))
MS_MARKERS = ("baseline_inference_time_in_ms", DUAL[0][0])


def _header(text: str) -> list[str]:
    first = text.lstrip("\ufeff").splitlines()[0] if text.strip() else ""
    return next(csv.reader([first]), [])


def detect(text: str) -> bool:
    return set(IDENTITY) <= set(_header(text))


class BadCell(ValueError):
    """A cell holding a time or speedup no measurement gives: (column, why)."""


def _number(line: dict, column: str | None) -> float | None:
    """A measured value of the cell, None where torchao measured nothing (its 0.0, an
    empty or absent cell, text); a negative or non-finite number is no time or speedup
    and raises BadCell."""
    try:
        out = float(line.get(column))
    except (TypeError, ValueError):
        return None
    if out != out or out in (float("inf"), float("-inf")):
        raise BadCell(column, f"{line.get(column)!r} is not a finite number")
    if out < 0:
        raise BadCell(column, f"{line.get(column)!r} is negative")
    return out if out > 0 else None


def _cases(line: dict, columns: set[str]) -> list[tuple[str, list[tuple]]]:
    """(compile, [(metric, value, extra)]) of each case one line holds."""
    if DUAL[0][0] in columns:
        out = []
        for time_col, base_col, eager_col, compiled in DUAL:
            metrics = [("latency mean (ms)", _number(line, time_col), {"unit": "ms"}),
                       ("speedup vs baseline (x)", _number(line, base_col),
                        {"unit": "x", "basis": "torchao " + base_col})]
            if eager_col:
                metrics.append(("speedup vs eager (x)", _number(line, eager_col),
                                {"unit": "x", "basis": "torchao " + eager_col}))
            mode = (line.get("torch_compile_mode") or "default") if compiled else "eager"
            out.append((mode, metrics))
        return out
    micro = not any(m in columns for m in MS_MARKERS)
    value = _number(line, OLD_TIME)
    extra = {"unit": "ms"}
    if micro and value is not None:
        value /= 1000.0
        extra["converted_from"] = "us (torchao before #2151 wrote µs in this column)"
    compiled = str(line.get("use_torch_compile", "")).strip().lower() == "true"
    mode = (line.get("torch_compile_mode") or "default") if compiled else "eager"
    return [(mode, [("latency mean (ms)", value, extra),
                    ("speedup vs baseline (x)", _number(line, "speedup"),
                     {"unit": "x", "basis": "torchao speedup"})])]


def _parts(line: dict, compile_mode: str) -> tuple[str, dict, dict, dict]:
    """(case id, benchmark, model, inputs) of one case of a line."""
    quant = line.get("quantization") or "baseline"
    sparsity = line.get("sparsity") if line.get("sparsity") not in (None, "", "None") else None
    shape = f"{line.get('m')}x{line.get('k')}x{line.get('n')}"
    cid = case_id("torchao", line.get("name"), quant + (f"+{sparsity}" if sparsity else ""),
                  shape, line.get("device"), compile_mode)
    dtype = str(line.get("high_precision_dtype") or "").removeprefix("torch.") or "unknown"
    tail = str(line.get("output_dir") or "").rstrip("/").rsplit("/", 1)[-1]
    bench = {"name": "torchao", "mode": tail if tail in ("inference", "training")
             else "inference",
             "dtype": dtype if quant in ("baseline", "None") else quant,
             "extra_info": dashboard.strings({
                 "device": line.get("device") or "unknown", "arch": "unknown",
                 "case_id": cid, "recipe": quant, "sparsity": sparsity, "dtype": dtype,
                 "compile_mode": compile_mode})}
    model = {"name": str(line.get("name") or "unknown"),
             "type": str(line.get("model_type") or "unknown"),
             "backend": "torch-eager" if compile_mode == "eager" else "torch-inductor",
             "origins": ["torchao"],
             "extra_info": dashboard.strings({"shape": shape})}
    inputs = {"input": {"dtype": dtype, "extra_info": dashboard.strings(
        {"shape": f"[{line.get('m')}, {line.get('k')}]"})}}
    return cid, bench, model, inputs


def runs(path: Path, text: str, timestamp: int | None) -> list:
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    columns = set(reader.fieldnames or [])
    if OLD_TIME not in columns and DUAL[0][0] not in columns:
        raise problem(path, "header", "no latency column",
                      f"{OLD_TIME} or {DUAL[0][0]} (a torchao results CSV)")
    times, merged = [], {}
    for number, line in enumerate(reader, start=2):
        if None in line:  # more cells than the header names
            raise problem(path, f"line {number}", "more cells than the header",
                          f"{len(reader.fieldnames)} cells")
        if line.get("timestamp"):
            times.append(unix_time(line["timestamp"], path, f"line {number}: timestamp"))
        try:
            cases = _cases(line, columns)
        except BadCell as exc:
            column, why = exc.args
            raise problem(path, f"line {number}: {column}", why,
                          "a time or speedup of at least 0 (0: not measured)") from None
        for mode, metrics in cases:
            cid, bench, model, inputs = _parts(line, mode)
            for name, value, extra in metrics:
                if value is None:
                    continue
                key = (cid, name)
                if key not in merged:
                    merged[key] = {"benchmark": bench, "model": model, "inputs": inputs,
                                   "dependencies": {}, "runners": [dashboard.runner({})],
                                   "metric": {"name": name, "benchmark_values": [],
                                              "target_value": 0.0,
                                              "extra_info": dashboard.strings(extra)}}
                merged[key]["metric"]["benchmark_values"].append(value)
    if not merged:
        raise problem(path, "", "no measured value in any line",
                      "a torchao results CSV with positive times")
    when = min(times) if times else need_time(
        path, timestamp, "a torchao results CSV has no timestamp column")
    return [make_run(SOURCE, path, when, list(merged.values()), {"name": "torchao"})]
