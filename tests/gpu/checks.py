"""What the GPU tier (tests/gpu/test_gpu_suites.py) checks, as plain functions: whether
this machine has what a GPU suite needs (and, where not, which part is missing), a
case's time measured standalone, outside benchflow's protocol, and which cases of a
report break one of the tier's rules.

The rules take case records and return one line per offending case (an empty list: none),
so that a failure names every case at once, and so that tests/gpu/test_checks.py tests
them here on fixture records, without a GPU. The standalone measurements build a case
the way benchflow's own stages do (the IREE run stage's argv builder on the case's own
module and inputs; the torch worker's `Prepared`), so that only the timing differs.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from tests.conftest import DATA
from workflow import paths
from workflow.backends.iree import tools as iree_tools
from workflow.backends.proc import Timeout, capture
from workflow.backends.torch import ops_profile
from workflow.records.storage import read_json

IREE_SUITE = DATA / "gpu" / "h100_iree.yaml"
TORCH_SUITE = DATA / "gpu" / "h100_torch.yaml"
# How far a case's median may be from its standalone measurement: the first H100 run
# came within 0.7 % (IREE linear f32: 18.22 ms against 18.1 ms) and 2.5 % (torch eager
# bf16 linear: 0.0563 ms against triton's do_bench 0.0549 ms).
TOLERANCE = 0.10
# Repetitions of the standalone iree-benchmark-module run (one process, as a user would
# run it), each as long as the SKU's own repetitions.
STANDALONE_REPETITIONS = 10
PROBE_TIMEOUT_S = 60
# `nvidia-smi -L`: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)", one line per GPU.
_GPU_LINE = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: [^)]*\))?$")


# --- does this machine have what a suite needs? ---------------------------------------

def listed_gpus(text: str) -> list[str]:
    """The GPU names `nvidia-smi -L` lists, in its order; [] when it lists none."""
    return [m.group(2) for line in text.splitlines()
            if (m := _GPU_LINE.match(line.strip()))]


def nvidia_gpu_missing() -> str | None:
    """Why `nvidia-smi -L` shows no NVIDIA GPU here, or None when it lists one."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return "no NVIDIA GPU: nvidia-smi is not on PATH"
    try:
        proc = capture([tool, "-L"], timeout=PROBE_TIMEOUT_S)
    except (Timeout, OSError) as exc:
        return f"no NVIDIA GPU: nvidia-smi -L did not answer ({exc})"
    if proc.returncode != 0:
        said = " ".join((proc.stderr or proc.stdout).split())[:200]
        return f"no NVIDIA GPU: nvidia-smi -L exited with {proc.returncode} ({said})"
    return None if listed_gpus(proc.stdout) else "no NVIDIA GPU: nvidia-smi -L lists none"


def torch_cuda_missing() -> str | None:
    """Why this interpreter's torch cannot use CUDA, or None when it can. A GPU machine
    may run IREE's CUDA HAL with a CPU build of torch (this project's venv has one)."""
    import torch

    if torch.cuda.is_available():
        return None
    build = ("a CPU build: torch.version.cuda is None" if torch.version.cuda is None
             else f"built for CUDA {torch.version.cuda}, but no device or driver answers")
    return (f"torch {torch.__version__} cannot use CUDA "
            f"(torch.cuda.is_available() is False; {build})")


def iree_cuda_missing() -> str | None:
    """Why IREE's CUDA HAL has no device here (benchflow's own probe, the one that makes
    a case compile-only), or None when it lists one."""
    return iree_tools.device_absent_reason("cuda")


def missing_reason(suite: Path, missing: list[str | None]) -> str | None:
    """The reason a suite's GPU tests skip: every part it needs that is missing, each in
    its own words; None when nothing is."""
    found = [m for m in missing if m]
    return f"{suite.name} needs a CUDA GPU here: " + "; ".join(found) if found else None


# --- picking the records ----------------------------------------------------------------

def ok_cases(cases: list[dict], backend_kind: str) -> list[dict]:
    """The measured cases of IREE (`iree`) or of the torch backends (`torch`)."""
    return [c for c in cases if c["status"] == "ok"
            and (c["backend"] == "iree") == (backend_kind == "iree")]


def on_cuda(case: dict) -> bool:
    """Whether a case ran on CUDA: an IREE case on its SKU's cuda device, a torch case
    on a `device: cuda` workload."""
    if case["backend"] == "iree":
        return (case.get("provenance") or {}).get("iree_device") == "cuda"
    return case.get("device") == "cuda"


def status_problems(cases: list[dict]) -> list[str]:
    """Cases neither ok nor unsupported/skipped with a reason: a GPU run must measure
    every case it can, and say why of each one it cannot."""
    out = []
    for c in cases:
        if c["status"] == "ok":
            continue
        if c["status"] in ("unsupported", "skipped") and (c.get("error") or "").strip():
            continue
        where = f" at {c['stage']}" if c.get("stage") else ""
        why = (c.get("error") or "").strip() or "no reason"
        out.append(f"{c['id']}: {c['status']}{where}: {why[:300]}")
    return out


def missing_cases(cases: list[dict], planned: set[str]) -> list[str]:
    """Planned case ids the report has no record of, and records of cases not planned."""
    ids = {c["id"] for c in cases}
    return ([f"{i}: planned, no record" for i in sorted(planned - ids)]
            + [f"{i}: a record, not planned" for i in sorted(ids - planned)])


def time_problems(cases: list[dict], standalone_ms: dict[str, float],
                  tolerance: float = TOLERANCE) -> list[str]:
    """Cases whose median is more than `tolerance` (a fraction) away from their
    standalone time, or that have no standalone time or no median."""
    out = []
    for c in cases:
        median = (c.get("timing") or {}).get("median_ms")
        alone = standalone_ms.get(c["id"])
        if median is None or alone is None:
            out.append(f"{c['id']}: " + ("no median in its timing" if median is None
                                         else "no standalone time"))
            continue
        if alone <= 0 or abs(median - alone) > tolerance * alone:
            out.append(f"{c['id']}: benchflow {median:.4g} ms, standalone {alone:.4g} ms "
                       f"(x{median / alone if alone > 0 else float('inf'):.3f}; "
                       f"expected within {tolerance:.0%})")
    return out


def _kernels_problem(case: dict) -> str | None:
    k = case.get("kernels")
    if k is None:
        return "no kernels section (not profiled)"
    if k.get("error"):
        return f"kernels from {k.get('source')} failed: {k['error'][:300]}"
    if not k.get("rows"):
        return f"kernels from {k.get('source')} has no rows"
    return None


def iree_kernel_problems(cases: list[dict]) -> list[str]:
    """Measured IREE CUDA cases whose `kernels` has no rows or an error: per-dispatch
    attribution must reach a GPU case (whatever its source names)."""
    out = []
    for c in ok_cases(cases, "iree"):
        problem = on_cuda(c) and _kernels_problem(c)
        if problem:
            out.append(f"{c['id']}: {problem}")
    return out


def torch_kernel_problems(cases: list[dict]) -> list[str]:
    """Measured torch CUDA cases whose `kernels` is not torch.profiler's CUDA kernels
    (ops_profile.SOURCE in ops_profile.CUDA_MODE: a row per CUDA kernel with its device
    time) with rows of device time."""
    out = []
    expected = (ops_profile.SOURCE, ops_profile.CUDA_MODE)
    for c in ok_cases(cases, "torch"):
        if not on_cuda(c):
            continue
        problem = _kernels_problem(c)
        k = c.get("kernels") or {}
        if problem is None and (k.get("source"), k.get("mode")) != expected:
            problem = (f"kernels from {k.get('source')} in mode {k.get('mode')}; expected "
                       f"{expected[0]} in mode {expected[1]}")
        if problem is None and not any((r.get("total_ms") or 0) > 0 for r in k["rows"]):
            problem = "kernels rows hold no CUDA device time"
        if problem:
            out.append(f"{c['id']}: {problem}")
    return out


def snapshot_problems(cases: list[dict], asked: set[str], workdir: Path) -> list[str]:
    """Measured torch CUDA cases of the workloads that asked for a memory snapshot
    (`asked`: workload ids with memory_profiler) without a non-empty snapshot file
    (`profile.memory_snapshot`, relative to the suite's working directory)."""
    out = []
    for c in ok_cases(cases, "torch"):
        if c["workload"] not in asked or not on_cuda(c):
            continue
        profile = c.get("profile") or {}
        path = profile.get("memory_snapshot")
        if not path:
            out.append(f"{c['id']}: no memory snapshot "
                       f"({profile.get('memory_snapshot_status') or 'no status either'})")
            continue
        file = workdir / path
        if not file.is_file() or file.stat().st_size == 0:
            out.append(f"{c['id']}: memory snapshot {path} is "
                       + ("empty" if file.is_file() else "missing"))
    return out


# --- standalone measurements ------------------------------------------------------------

def iree_standalone_argv(workdir: Path, case: dict, sku: dict, input_dir: Path) -> list[str]:
    """iree-benchmark-module on the case's own module and inputs, as the run stage builds
    its command (jobs/iree.run_iree), with STANDALONE_REPETITIONS repetitions; the
    inputs are written to `input_dir` as the run stage writes them."""
    from workflow.jobs.iree import sku_tool

    workload, m = case["workload"], sku["measurement"]
    meta = read_json(workdir / paths.EXPORT_META.format(workload=workload))
    inputs = iree_tools.write_input_files(
        str(workdir / paths.EXPORT_INPUTS.format(workload=workload)),
        [i["dtype"] for i in meta["inputs"]], input_dir)
    vmfb = workdir / paths.COMPILE_VMFB.format(sku=case["sku"], workload=workload)
    return iree_tools.benchmark_argv(
        sku_tool(sku, "benchmark_tool"), str(vmfb), "main", inputs, sku,
        repetitions=STANDALONE_REPETITIONS, warmup_s=m["min_warmup_time_s"],
        min_time=f"{m['min_time_s']:g}s")


def iree_standalone_ms(workdir: Path, case: dict, sku: dict, timeout: float = 600) -> float:
    """The median of one standalone iree-benchmark-module run of the case, in ms."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = iree_standalone_argv(workdir, case, sku, Path(tmp))
        proc = capture(argv, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"{case['id']}: standalone {' '.join(argv)} exited with "
                             f"{proc.returncode}:\n{proc.stderr[-2000:]}")
    return iree_tools.parse_benchmark_json(proc.stdout).median_ms


def bench_ms(fn, *, cuda: bool, threads: int) -> float:
    """A callable's time per call in ms, measured apart from benchflow: on CUDA triton's
    do_bench (CUDA events, its median) where triton is importable, else torch's
    Timer.blocked_autorange on `threads` threads (its median; it synchronizes CUDA
    itself)."""
    import torch.utils.benchmark as tb

    if cuda:
        try:
            from triton.testing import do_bench
        except ImportError:
            do_bench = None
        if do_bench is not None:
            return float(do_bench(fn, return_mode="median"))
    timer = tb.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
    return timer.blocked_autorange(min_run_time=1.0).median * 1e3


def torch_standalone_ms(suite, case: dict) -> float:
    """A torch case built as its worker built it (backends/torch/prepared.Prepared:
    model, dtype, device, recipe, torch.compile) on as many threads as the case was
    measured on (its provenance's torch_threads), warmed up as the SKU says, then timed
    by bench_ms in this process. `suite`: the suite as workflow.suite.load gives it."""
    import torch

    from workflow.backends.torch.prepared import Prepared, probe_device, warm_up

    planned = suite.case(case["sku"], case["backend"], case["workload"], case["recipe"])
    device, why = probe_device(planned.workload.device, planned.recipe)
    if why:
        raise AssertionError(f"{case['id']}: cannot measure it standalone here: {why}")
    threads = (case.get("provenance") or {}).get("torch_threads") or torch.get_num_threads()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        prepared = Prepared({"id": planned.id, "workload": planned.workload.spec(),
                             "recipe": planned.recipe},
                            suite.config["torch_backends"][planned.backend], device)
        warm_up(prepared, suite.sku(planned.sku)["measurement"])
        return bench_ms(prepared.call, cuda=device.kind == "cuda", threads=threads)
    finally:
        torch.set_num_threads(before)
