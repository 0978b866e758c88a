"""results/dashboard.json: PyTorch OSS benchmark database v3 records, one per metric of a
case that produced it (failed cases have no numbers and no records). A compile-only case
(compiled here, not run: its device is absent) gives its compile metrics only (compile
time, dispatch count, binary size), never a latency, with the CPU that compiled it as
its runner.

Field names follow pytorch/test-infra's oss_ci_benchmark_v3 table: benchmark {name, mode,
dtype, extra_info}, model {name, type, backend, origins, extra_info}, inputs, dependencies
{repo, branch, sha, version, extra_info}, metric {name, benchmark_values, target_value,
extra_info}, runners [{name, type, cpu_info, cpu_count, mem_info, avail_mem_in_gb,
gpu_info, gpu_count, gpu_mem_info, avail_gpu_mem_in_gb, extra_info}]. Every extra_info is a
Map(String, String) there, so every value is a string here; the dashboard drops rows whose
device or metric name is empty, so neither ever is. The uploader (test-infra's
upload-benchmark-results) adds the repo, commit and workflow fields itself.
"""

from __future__ import annotations

import json

from workflow.records import measurement_config, schemas
from workflow.render import common as c
from workflow.stats.enums import Status

BENCHMARK_NAME = "benchflow"
ORIGIN = "benchflow"
GIB = 1024**3

# Version keys of the report's provenance -> (dependency name, its repository).
DEPENDENCIES = (
    ("torch", "torch", "pytorch/pytorch"),
    ("iree-base-compiler", "iree", "iree-org/iree"),
    ("snakemake", "snakemake", "snakemake/snakemake"),
    ("torchao", "torchao", "pytorch/ao"),
)


def schema() -> dict:
    return schemas.load("dashboard")


def validate(records: list[dict]) -> None:
    """Raises jsonschema.ValidationError naming the first offending path."""
    schemas.validator(schema()).validate(records)


def strings(mapping: dict) -> dict[str, str]:
    """extra_info: string values only, nulls left out (a Map(String, String) has no null)."""
    out = {}
    for key, value in mapping.items():
        if value is None:
            continue
        out[key] = value if isinstance(value, str) else json.dumps(value)
    return out


def dependencies(prov: dict) -> dict:
    versions = prov.get("versions", {})
    out = {}
    for key, name, repo in DEPENDENCIES:
        if not versions.get(key):
            continue
        extra = {"package": key}
        if name == "iree" and versions.get("iree-base-runtime"):
            extra["runtime_version"] = versions["iree-base-runtime"]
        out[name] = {"repo": repo, "branch": "", "sha": "", "version": versions[key],
                     "extra_info": strings(extra)}
    return out


# A case's device (the workload's `device`, or the IREE runtime device of its SKU) ->
# the runner name test-infra's gather_runners_info gives it; every other device is a CPU.
GPU_RUNNERS = {"cuda": "cuda", "hip": "rocm", "rocm": "rocm"}


def gpu_runner(case: dict) -> str | None:
    """'cuda' or 'rocm' for a case that ran on a GPU, None for a CPU case (and for a
    compile-only case: nothing ran on its GPU, the CPU compiled it)."""
    if case.get("status") == Status.COMPILE_ONLY:
        return None
    device = case.get("device") or "cpu"
    if device in GPU_RUNNERS:
        return GPU_RUNNERS[device]
    return GPU_RUNNERS.get(c.section(case, "provenance").get("iree_device") or "")


def runner(prov: dict, case: dict | None = None) -> dict:
    """The machine a case ran on. As test-infra's gather_runners_info does, `name` is the
    device kind (cpu, cuda, rocm) and `type` its model: the CPU's, or for a GPU case the
    GPU's name where the case recorded one (its provenance's gpu_name, gpu_count and
    gpu_memory_bytes; the torch worker records them, and an IREE case whose SKU's
    target_chip is `auto` the GPU's name). The hostname goes to extra_info.
    The CPU and memory fields are the report's host."""
    host = prov.get("host", {})
    mem = host.get("memory_bytes")
    cpu = host.get("cpu_model") or host.get("machine") or "unknown"
    kind = gpu_runner(case) if case else None
    gpu = c.section(case, "provenance") if kind else {}
    gpu_name = gpu.get("gpu_name") or ""
    # A GPU case that ran had a GPU, whether or not it recorded how many.
    gpu_count = int(gpu.get("gpu_count") or 1) if kind else 0
    gpu_mem = gpu.get("gpu_memory_bytes")
    return {
        "name": kind or "cpu",
        "type": (gpu_name or "unknown") if kind else cpu,
        "cpu_info": cpu,
        "cpu_count": int(host.get("cores") or 0),
        "mem_info": f"{mem / GIB:.1f} GiB total" if mem else "",
        "avail_mem_in_gb": int(mem // GIB) if mem else 0,
        "gpu_info": gpu_name,
        "gpu_count": gpu_count,
        "gpu_mem_info": f"{gpu_mem / GIB:.1f} GiB per GPU" if gpu_mem else "",
        # All the runner's GPUs, as gather_runners_info counts them.
        "avail_gpu_mem_in_gb": int(gpu_mem * gpu_count // GIB) if gpu_mem else 0,
        "extra_info": strings({"hostname": host.get("name"), "os": host.get("os"),
                               "machine": host.get("machine")}),
    }


def basis_info(case: dict, which: str) -> dict[str, str]:
    """A speedup metric's extra_info beyond its unit: what the speedup is (`basis`:
    cross-run or paired), the case it is compared with, when each side was measured
    (cross-run) or the pair's interval (paired)."""
    basis = c.speedup_basis(case, which) or {}
    ci = basis.get("ci95") or [None, None]
    return strings({"basis": basis.get("kind"), "base_case_id": basis.get("base_id"),
                    "base_measured_at": basis.get("base_measured_at"),
                    "case_measured_at": basis.get("case_measured_at"),
                    "ci95_lo": ci[0], "ci95_hi": ci[1], "level": basis.get("level"),
                    "ab_row": basis.get("ab_row")})


def metrics(case: dict, peak: dict | None) -> list[tuple[str, list, float, dict]]:
    """(name, benchmark_values, target_value, extra_info) of every metric this case has;
    extra_info holds the unit, and a speedup's basis (`basis_info`).
    Latency carries every invocation median (the dashboard's 'multiple runs'); the golden
    median is its target, 0 where there is none (torchao's convention)."""
    timing, comp = c.section(case, "timing"), c.section(case, "compile")
    thr, mem, acc = c.section(case, "throughput"), c.section(case, "memory"), \
        c.section(case, "accuracy")
    golden = c.section(case, "golden")
    speedups = c.speedups(case)
    out = []
    if timing and case.get("status") == Status.OK:  # a compile-only case claims no timing
        out.append(("latency median (ms)", timing["invocation_medians_ms"],
                    golden.get("value_ms") or 0.0, {"unit": "ms"}))
    candidates = (
        ("compile time (s)", comp.get("seconds"), {"unit": "s"}),
        ("dispatch count", comp.get("dispatch_count"), {"unit": "count"}),
        ("binary size (bytes)", comp.get("binary_bytes"), {"unit": "bytes"}),
        ("throughput (GFLOP/s)", thr.get("gflops"), {"unit": "GFLOP/s"}),
        ("percent of peak (%)", c.percent_of_peak(case, peak), {"unit": "%"}),
        ("speedup vs eager (x)", speedups["vs_eager"],
         {"unit": "x", **basis_info(case, "vs_eager")}),
        ("speedup vs baseline (x)", speedups["vs_baseline"],
         {"unit": "x", **basis_info(case, "vs_baseline")}),
        ("peak memory (MB)", mem["peak_bytes"] / 1e6 if mem.get("peak_bytes") else None,
         {"unit": "MB"}),
        ("accuracy (pcc)", acc.get("pcc"), {"unit": "pcc"}),
    )
    out += [(name, [value], 0.0, extra) for name, value, extra in candidates
            if value is not None]
    return out


def benchmark_info(case: dict, prov: dict, arch: str) -> dict[str, str]:
    """A case's benchmark.extra_info: where and how it was measured, and what became of it."""
    return strings({
        "device": case.get("device") or "cpu", "arch": arch, "sku": case["sku"],
        "backend": case["backend"], "recipe": case["recipe"],
        "dtype": case["dtype"], "compile_mode": case.get("compile_mode"),
        "case_id": case["id"], "suite": prov.get("suite_name"),
        # When its numbers were taken: a history ingest of this file knows them for
        # the same measurements as its report's (history/importers/v3.py).
        "measured_at": c.section(case, "timing").get("measured_at")
        or c.section(case, "provenance").get("started_at"),
        "config_hash": prov.get("config_hash"),
        # What decides the level measured besides the code (threads, invocation
        # kind, device, measurement settings): the history keys a series by it.
        "measurement_config": measurement_config.as_text(
            measurement_config.of_case(case)),
        "noisy": c.section(case, "timing").get("noisy"),
        # Outside load during its kept invocations: every metric of the case
        # carries the flag, and the reason where it is set.
        "disturbed": c.disturbed(case) if c.section(case, "timing") else None,
        "disturbance_reason": (c.disturbance_reason(case) if c.disturbed(case)
                               else None),
        "golden_verdict": c.section(case, "golden").get("verdict"),
        "report_status": c.status(case),
        # A compile-only case: the device it targets and why it was not timed.
        "target_device": (c.section(case, "provenance").get("iree_device")
                          if case["status"] == Status.COMPILE_ONLY else None),
        "not_measured": c.not_measured(case, "timing"),
    })


def records(report: dict, peak: dict | None = None) -> list[dict]:
    prov = report.get("provenance", {})
    deps = dependencies(prov)
    cpu_arch = prov.get("host", {}).get("cpu_model") or "unknown"
    out = []
    for case in report["cases"]:
        if case["status"] not in (Status.OK, Status.COMPILE_ONLY):
            continue
        run = [runner(prov, case)]
        # torchao's arch: the CPU model, or the GPU model a GPU case recorded (else unknown).
        arch = cpu_arch if run[0]["name"] == "cpu" else run[0]["type"]
        benchmark = {
            "name": BENCHMARK_NAME,
            "mode": case["mode"],
            # The quantization where there is one, else the dtype (torchao's convention).
            "dtype": case["dtype"] if case["recipe"] == c.BASELINE else case["recipe"],
            "extra_info": benchmark_info(case, prov, arch),
        }
        model = {
            "name": case["workload"],
            "type": case["model"],
            "backend": case["backend"],
            "origins": [ORIGIN],
            "extra_info": strings({"model": case["model"], "config": case["config"],
                                   "shape": c.shape_text(case), "layers": case.get("layers"),
                                   "group": case.get("group")}),
        }
        inputs = {"shape": {"dtype": case["dtype"],
                            "extra_info": strings({"shape": case.get("shape")})}}
        for name, values, target, extra in metrics(case, peak):
            out.append({
                "benchmark": benchmark, "model": model, "inputs": inputs,
                "dependencies": deps, "runners": run,
                "metric": {"name": name, "benchmark_values": [float(v) for v in values],
                           "target_value": float(target),
                           "extra_info": extra},
            })
    return out


def render(report: dict, peak: dict | None = None) -> list[dict]:
    """The records, validated against workflow/schemas/dashboard.schema.json."""
    out = records(report, peak)
    validate(out)
    return out
