"""Forge's own results (entries benchflow wrote, holding a "benchflow" record, are read
by benchflow.py instead):

(a) the list tt-forge's benchmark.py appends to (tt-buda's pybuda/test/benchmark and
    tt-forge-fe until 2024-12): `[{"total_time", "total_samples", "samples_per_sec",
    "args": {...}, "arch", "machine_name", "hash", "date"[, "error"]}]`. Each entry is
    one run of one case, dated by its "date": `git show -s --format=%cd
    --date=format:%y-%m-%d HEAD`, the day of the benchmarked code's commit (the only
    date Forge writes; its time of day is unknown, taken as 00:00 UTC), with "hash" as
    head_sha. An entry with "error" is a failed run: a Run without rows that says so
    in `skipped`.
(b) tt-forge-fe's perf report (2025): one object `{"model", "run_type", "batch_size",
    "precision", "training", "measurements": [{"measurement_name", "value"}, ...],
    "device_info": {...}}`. It holds no date, so the caller's --timestamp dates it.

Values. Forge times `loop_count` pushes of a microbatch end to end (the seed README:
"real end-to-end time on host, starting post-compile at first input pushed, and ending
at last output received"); total_samples = loop_count x microbatch. Pushes overlap in
the device pipeline, so total_time / pushes is the mean time per batch at that rate,
not one batch's latency: it is recorded as "time per batch (ms)" (the quantity
benchflow's forge_entry writes as its per-call time, mean instead of median, hence not
"latency median (ms)"), and samples_per_sec as "throughput (samples/s)". A per-sample
"latency" would only be 1 / throughput again. A non-finite value (Forge writes
json.dumps' NaN) is left out; tt-forge-fe's "evaluation_score" is kept where it is
not 0.0, the value its benchmarks write when they evaluate nothing (task "na")."""

from __future__ import annotations

import math
from pathlib import Path

from workflow.history.importers.run import (
    case_id,
    make_run,
    need_time,
    problem,
    text_field,
    unix_time,
)
from workflow.records.results_file import is_forge_results
from workflow.render import dashboard

SOURCE = "forge"
DEVICE = "tenstorrent"
ORIGIN = "forge"


def detect(doc) -> bool:
    if is_forge_results(doc):
        return True
    return (isinstance(doc, dict) and isinstance(doc.get("measurements"), list)
            and "model" in doc and "run_type" in doc)


def runs(path: Path, doc, timestamp: int | None) -> list:
    if isinstance(doc, dict):
        return [_perf_report_run(path, doc, need_time(
            path, timestamp, "a tt-forge-fe perf report records no date"))]
    return [_entry_run(path, entry, i) for i, entry in enumerate(doc)]


def _finite(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _metrics(total_time, total_samples, per_sec, microbatch) -> list[tuple]:
    """(name, value, unit, derivation) of the throughput and the time per batch."""
    out = []
    per_sec = _finite(per_sec)
    t, n = _finite(total_time), _finite(total_samples)
    if per_sec is None and t and n:
        per_sec = n / t
    if per_sec:
        out.append(("throughput (samples/s)", per_sec, "samples/s", "samples_per_sec"))
    mb = _finite(microbatch)
    if t and n and mb and mb > 0 and n >= mb:
        out.append(("time per batch (ms)", 1e3 * t / (n / mb), "ms",
                    "1000 * total_time / (total_samples / microbatch)"))
    return out


def _row(bench: dict, model: dict, run: list, name: str, value: float, unit: str,
         how: str) -> dict:
    return {"benchmark": bench, "model": model, "inputs": {}, "dependencies": {},
            "runners": run,
            "metric": {"name": name, "benchmark_values": [value], "target_value": 0.0,
                       "extra_info": dashboard.strings({"unit": unit, "derived": how})}}


def _runner(host, arch) -> list[dict]:
    """The machine: dashboard.runner's host fields, named as the Tenstorrent device."""
    run = dashboard.runner({"host": {"name": host if isinstance(host, str) else None}})
    run["name"] = DEVICE
    run["type"] = str(arch) if arch else "unknown"
    return [run]


def _entry_run(path: Path, entry: dict, index: int):
    args = entry.get("args") if isinstance(entry.get("args"), dict) else {}
    key = f"entries[{index}]"
    if not entry.get("date"):
        raise problem(path, f"{key}.date", "absent",
                      "the date Forge's benchmark.py writes (%y-%m-%d)")
    when = unix_time(entry["date"], path, f"{key}.date")
    mode = "training" if args.get("training") else "inference"
    arch = entry.get("arch") or args.get("arch")
    cid = case_id("forge", args.get("model"), args.get("config"), mode,
                  args.get("dataformat"), args.get("math_fidelity"),
                  args.get("microbatch"), args.get("layers"), args.get("chips"), arch)
    meta = {"head_sha": entry.get("hash"), "name": SOURCE}
    if "error" in entry:
        return make_run(SOURCE, path, when, [], meta,
                        [f"{key}: failed run ({cid}): {entry.get('error')}"], cases=1)
    arch = text_field(path, f"{key}.arch", arch, "unknown")
    dtype = text_field(path, f"{key}.args.dataformat", args.get("dataformat"), "unknown")
    bench = {"name": SOURCE, "mode": mode, "dtype": dtype,
             "extra_info": dashboard.strings({
                 "device": DEVICE, "arch": arch, "case_id": cid,
                 "math_fidelity": args.get("math_fidelity"),
                 "loop_count": args.get("loop_count"), "chips": args.get("chips"),
                 "cached": entry.get("cached")})}
    name = text_field(path, f"{key}.args.model", args.get("model"), "unknown")
    model = {"name": name, "type": name, "backend": SOURCE,
             "origins": [ORIGIN],
             "extra_info": dashboard.strings({"config": args.get("config"),
                                              "layers": args.get("layers"),
                                              "microbatch": args.get("microbatch")})}
    run = _runner(entry.get("machine_name"), arch)
    rows = [_row(bench, model, run, *m) for m in _metrics(
        entry.get("total_time"), entry.get("total_samples"), entry.get("samples_per_sec"),
        args.get("microbatch"))]
    skipped = [] if rows else [f"{key}: no finite total_time/samples_per_sec ({cid})"]
    return make_run(SOURCE, path, when, rows, meta, skipped, cases=1)


def _measurements(path: Path, doc: dict) -> dict[str, float]:
    out = {}
    for i, m in enumerate(doc["measurements"]):
        if not isinstance(m, dict) or not isinstance(m.get("measurement_name"), str):
            raise problem(path, f"measurements[{i}]", "not a measurement",
                          "an object with measurement_name and value")
        value = _finite(m.get("value"))
        if value is not None:
            out[m["measurement_name"]] = value
    return out


def _perf_report_run(path: Path, doc: dict, when: int):
    mode = "training" if doc.get("training") else "inference"
    device = doc.get("device_info") if isinstance(doc.get("device_info"), dict) else {}
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    shape = doc.get("image_dimension") or (
        f"seq{doc.get('input_sequence_length')}" if (doc.get("input_sequence_length") or -1)
        > 0 else None)
    cid = case_id("forge", doc.get("model"), config.get("model_size"), mode,
                  doc.get("precision"), doc.get("batch_size"), shape,
                  doc.get("num_layers"), device.get("arch"), device.get("chips"))
    bench = {"name": SOURCE, "mode": mode,
             "dtype": text_field(path, "precision", doc.get("precision"), "unknown"),
             "extra_info": dashboard.strings({
                 "device": DEVICE,
                 "arch": text_field(path, "device_info.arch", device.get("arch"), "unknown"),
                 "case_id": cid, "run_type": doc.get("run_type"),
                 "dataset": doc.get("dataset_name"), "chips": device.get("chips")})}
    name = text_field(path, "model", doc.get("model"), "unknown")
    model = {"name": name,
             "type": text_field(path, "model_type", doc.get("model_type"), name),
             "backend": SOURCE, "origins": [ORIGIN],
             "extra_info": dashboard.strings({"config": config or None,
                                              "layers": doc.get("num_layers"),
                                              "batch_size": doc.get("batch_size"),
                                              "shape": shape})}
    run = _runner(doc.get("device_ip"), text_field(
        path, "device_info.device_name", device.get("device_name"), bench["extra_info"]["arch"]))
    values = _measurements(path, doc)
    rows = [_row(bench, model, run, *m) for m in _metrics(
        values.get("total_time"), values.get("total_samples"), None, doc.get("batch_size"))]
    if values.get("evaluation_score"):
        rows.append(_row(bench, model, run, "evaluation score", values["evaluation_score"],
                         "score", "evaluation_score"))
    if not rows:
        raise problem(path, "measurements", "no finite total_time and total_samples",
                      "a tt-forge-fe perf report with both")
    return make_run(SOURCE, path, when, rows, {"name": SOURCE})

