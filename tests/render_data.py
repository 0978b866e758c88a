"""Inputs of the renderer tests.

tests/data/report_iree.json and report_torch.json are real reports: snakemake runs of
small suites on the 2-core CI machine (IREE on two SKUs with a 2 x 2 linear shape sweep
and a model IREE cannot compile; IREE, torch-eager and torch-inductor with the baseline
and int8wo recipes). `with_synthetic_verdicts` derives from a real report what no small
real run produces on demand; everything it changes is marked SYNTHETIC in the case's
provenance. `with_kernels` adds kernels blocks (report.schema.json's `kernels`) built from
real profiles: iree-profile captures under tests/data/iree_profile and a torch.profiler
capture, tests/data/torch_profile_linear.json (its `made_by` says how it was made).
"""

from __future__ import annotations

import copy
import functools
import json
import statistics

from tests.conftest import DATA
from workflow.backends.iree.profile import compile_statistics, dispatch_rows
from workflow.backends.torch import recipes
from workflow.records.case import assemble, unsupported_case
from workflow.records.kernels import kernels_section
from workflow.records.stage import NO_DEVICE, StageResult
from workflow.stats.speedup import fill_speedups

PEAK = {"gflops": 100.0, "dtype": "f32", "method": "test peak", "measured_at": "test"}


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def iree_report() -> dict:
    return load("report_iree.json")


def torch_report() -> dict:
    return load("report_torch.json")


def find(report: dict, case_id: str) -> dict:
    return next(c for c in report["cases"] if c["id"] == case_id)


def with_synthetic_verdicts(report: dict) -> dict:
    """A copy of `report` where one ok case has a golden time regression, one a PCC
    below its threshold and one a binary size regression (SYNTHETIC: a renderer input,
    not a measurement)."""
    out = copy.deepcopy(report)
    ok = sorted((c for c in out["cases"] if c["status"] == "ok"), key=lambda c: c["id"])
    regressed, inaccurate, bigger = ok[0], ok[1], ok[2]
    median = regressed["timing"]["median_ms"]
    regressed["golden"].update(verdict="regression", value_ms=median / 1.3, tolerance=1.1,
                               ratio=1.3, p_value=0.012)
    inaccurate["accuracy"].update(pcc=0.95, accurate=False)
    bigger["golden"]["size_verdict"] = "regression"
    for case in (regressed, inaccurate, bigger):
        case["provenance"]["synthetic"] = "SYNTHETIC verdict for renderer tests"
    return out


TRAIN = "linear-64x64x64-f32-train"
# What the training cases of `with_training` derive from: (backend, its kind, recipe).
TRAINING_SIDES = (("torch-eager", "eager", "baseline"), ("torch-inductor", "inductor", "baseline"),
                  ("torch-eager", "eager", "int8wo"), ("iree", "iree", "baseline"))


def with_training(report: dict) -> dict:
    """A copy of the torch report plus the training cases of linear 64x64x64 (SYNTHETIC:
    renderer inputs): torch-eager and torch-inductor baseline steps, the inference cases'
    measurements renamed (the eager one quiet, CV 3.1 %, not noisy); torch-eager int8wo
    and IREE baseline unsupported, with the reasons the recipes give. Speedups refilled."""
    out = copy.deepcopy(report)
    for backend, kind, recipe in TRAINING_SIDES:
        src = find(out, f"host/{backend}/linear-64x64x64-f32/{recipe}")
        identity = {**src, "id": f"host/{backend}/{TRAIN}/{recipe}", "workload": TRAIN,
                    "mode": "training"}
        why = recipes.static_reason(recipes.parse(recipe), backend_kind=kind, mode="training")
        if why:
            out["cases"].append(unsupported_case(identity, why))
            continue
        case = copy.deepcopy(identity)  # shares nothing with its inference case
        case["timing"]["phases_ms"] = {"forward": 1.0, "backward": 2.0, "optimizer": 0.5}
        if backend == "torch-eager":
            case["timing"].update(cv=0.031, noisy=False)
        case["provenance"]["synthetic"] = "SYNTHETIC training case for renderer tests"
        out["cases"].append(case)
    fill_speedups(out["cases"])
    return out


def median_of_invocations(case: dict) -> float:
    """The case's median recomputed from its raw invocation medians."""
    return statistics.median(case["timing"]["invocation_medians_ms"])


# --- kernels: where each case's time goes (issue 25) -------------------------------------

PROFILES = DATA / "iree_profile"
KEEP = 24  # the record keeps at most 24 rows, the rest summed in one "(N others)" row


def kernels_block(rows: list[dict], *, source: str, mode: str, calls: int | None,
                  seconds: float | None, keep: int = KEEP) -> dict:
    """A kernels block as the record holds it (records/kernels.kernels_section), from rows
    largest first (name, count, total_ms; total_ms None when compile-only): shares of the
    rows' sum, as the profilers give them, the rows past `keep` summed in one row."""
    timed = calls is not None
    total = sum(r["total_ms"] for r in rows) if timed else None
    shared = [{**r, "share": r["total_ms"] / total if timed and total else None,
               **({"mean_ms": r["total_ms"] / r["count"] if r["count"] else None}
                  if timed else {})} for r in rows]
    return kernels_section(source=source, mode=mode, calls=calls, rows=shared,
                           seconds=seconds, top=keep)


def iree_kernels(capture: str, calls: int, keep: int = KEEP) -> dict:
    """The kernels of a real `iree-profile dispatch --format=jsonl` capture (`calls`:
    the entry function calls it covers, tests/data/iree_profile/README.md)."""
    rows = dispatch_rows((PROFILES / f"{capture}.dispatch.jsonl").read_text())
    return kernels_block(rows, source="iree-profile", mode="host-execution", calls=calls,
                         seconds=0.21, keep=keep)


def torch_kernels() -> dict:
    """The kernels of the real torch.profiler capture: per aten op, its self CPU time."""
    capture = load("torch_profile_linear.json")
    rows = [{"name": r["name"], "count": r["count"],
             "total_ms": r["self_cpu_time_total_us"] / 1000} for r in capture["rows"]]
    return kernels_block(rows, source="torch.profiler", mode="cpu", calls=capture["calls"],
                         seconds=0.05)


# ln_linear_gelu [128, 256, 256] compiled for cuda sm_80 on a machine without its GPU.
GPU_CASE = "gpu/iree/ln_linear_gelu-128x256x256-f32/baseline"
PROFILE_FAILED = ("profiling (dispatch-events) failed: iree-benchmark-module exited with 1: "
                  "UNIMPLEMENTED; device profiling mode <dispatch-events> | not supported")


def compile_only_case() -> dict:
    """The compile-only case of GPU_CASE, its kernels the compiler's dispatch list from
    the real CSV statistics of that compile."""
    stats = compile_statistics((PROFILES / "ln_linear_gelu.cuda-sm80.statistics.csv")
                               .read_text())
    identity = {"id": GPU_CASE, "model": "ln_linear_gelu", "config": "default",
                "dtype": "f32", "shape": [128, 256, 256], "sku": "gpu", "backend": "iree",
                "recipe": "baseline", "mode": "inference",
                "workload": "ln_linear_gelu-128x256x256-f32", "layers": None,
                "device": "cpu", "compile_mode": None, "group": None}
    why = "no cuda device here: iree.runtime's cuda driver lists no device"
    results = [StageResult("compile", data={
                   "seconds": 0.4, "dispatch_count": stats["dispatch_count"],
                   "binary_bytes": 41462, "executable_count": stats["executable_count"],
                   "flags": ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"],
                   "compiler_version": "3.13.0"}),
               *(StageResult(stage, status=NO_DEVICE, failed_stage=stage, error=why)
                 for stage in ("run", "verify"))]
    case = assemble(identity, results, {"iree_device": "cuda"})
    case["kernels"] = kernels_block(stats["dispatches"], source="iree-compile",
                                    mode="compile-only", calls=None, seconds=None)
    return case


def with_kernels(report: dict) -> dict:
    """A copy of `report` (the IREE or torch fixture) whose cases carry kernels blocks of
    the real captures (SYNTHETIC: a capture of one model attached to a case of another,
    marked in the case's provenance): the IREE report's ln_linear_relu host case gets
    ln_linear_gelu's three dispatches, its linear-64x128x64 host case transformer_block's
    eleven (six kept, '(5 others)'), one case a profiling failure, plus the compile-only
    GPU case; the torch report's torch-eager linear 64x64x64 case gets the torch.profiler
    capture of that linear; either report gets the compile-only GPU case. Every other
    case stays unprofiled (kernels null)."""
    out = copy.deepcopy(report)
    ids = {c["id"] for c in out["cases"]}
    attach = {
        "host/iree/ln_linear_relu-16x32x64-f32/baseline":
            lambda: iree_kernels("ln_linear_gelu.local-task", calls=5),
        "host/iree/linear-64x128x64-f32/baseline":
            lambda: iree_kernels("transformer_block.local-sync", calls=3, keep=6),
        "generic/iree/linear-64x32x32-f32/baseline":
            lambda: {**kernels_block([], source="iree-profile", mode="dispatch-events",
                                     calls=None, seconds=0.02), "error": PROFILE_FAILED},
        "host/torch-eager/linear-64x64x64-f32/baseline": torch_kernels,
    }
    for case in out["cases"]:
        case.setdefault("kernels", None)
        if case["id"] in attach:
            case["kernels"] = attach[case["id"]]()
            case["provenance"]["synthetic"] = "SYNTHETIC kernels for renderer tests"
    if GPU_CASE not in ids:
        out["cases"].append(compile_only_case())
    return out


# --- a report as wide as real ones get (issue 45) ----------------------------------------

# iree.runtime's own words on a machine without libcuda (results/report.json of `make
# report` on the CI machine): the longest text a case table cell ever held.
CUDA_ABSENT = ("no cuda device here: iree.runtime's cuda driver is unavailable (Error creating "
               "driver: c/runtime/src/iree/hal/drivers/cuda/cuda_dynamic_symbols.c:66: "
               "UNAVAILABLE; CUDA driver library 'libcuda.so'/'nvcuda.dll' not available; "
               "please ensure installed and in dynamic library search path)")
INCONCLUSIVE = "host/iree/linear-16x32x32-f32/baseline"


def wide_report() -> dict:
    """The IREE report with its kernels and the compile-only GPU case, whose reason is the
    real absent-CUDA message; one ok case's golden verdict inconclusive ×1.381 and every
    timed case stopped width-out-of-reach (SYNTHETIC: renderer inputs)."""
    out = with_kernels(iree_report())
    gpu = find(out, GPU_CASE)
    gpu["error"] = CUDA_ABSENT
    for entry in gpu["not_measured"].values():
        entry["reason"] = CUDA_ABSENT
    find(out, INCONCLUSIVE)["golden"].update(verdict="inconclusive", ratio=1.381)
    for case in out["cases"]:
        if case["status"] == "ok" and case.get("timing"):
            case["timing"]["stop_reason"] = "width-out-of-reach"
            case["provenance"]["synthetic"] = "SYNTHETIC verdict and stop for renderer tests"
    return out


def with_unsupported(report: dict, n: int) -> dict:
    """A copy of the torch report with `n` more unsupported IREE int8wo cases, one per
    shape of a sweep (SYNTHETIC: what a torchao file's sweep makes on the IREE backend)."""
    out = copy.deepcopy(report)
    model = find(out, "host/iree/linear-64x64x64-f32/int8wo")
    for i in range(n):
        workload = f"linear-{i + 1}x64x64-f32"
        out["cases"].append({**copy.deepcopy(model), "id": f"host/iree/{workload}/int8wo",
                             "workload": workload, "shape": [i + 1, 64, 64]})
    return out


@functools.cache
def html_page(name: str) -> str:
    """report.html of `torch_report()` or `wide_report()` (by name), rendered once per test
    process: its plots take seconds, and several tests read the same page. Rendering
    neither changes the report nor depends on anything but it and PEAK."""
    from workflow.render import html

    return html.render({"torch": torch_report, "wide": wide_report}[name](), PEAK)
