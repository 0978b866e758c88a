"""Torch measurements, run in a fresh worker process per pass (see torch_stage.py).

    python -m workflow.backends.torch.worker PLAN_JSON characterize|time|serve

A plan is a batch of cases sharing SKU, backend and recipe. Each case prints a "start"
line, then a "result" line, as JSON on stdout, so that the parent can enforce a
per-case deadline and lose at most the case that hung or crashed. `serve` is one side of
a torch A/B pair: one case, prepared once, timed block by block on request (`serve`).

`characterize` runs once per batch: support checks, accuracy against the fp32 eager
reference, SQNR against the unquantized module, graph statistics, compile time,
first call, peak memory, profiler artifacts, the per-op profile (ops_profile.py). `time`
is one invocation of every case: warm-up, then torch.utils.benchmark's blocked_autorange
(inference) or per-phase timings (training).
"""

from __future__ import annotations

import faulthandler
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

from workflow.backends.proc import protocol_channel
from workflow.backends.torch.ops_profile import profile_ops, write_trace
from workflow.backends.torch.recipes import (
    Device,
    apply,
    device_reason,
    layer_reason,
    min_sqnr_db,
    parse,
    torchao_kernels_loaded,
)
from workflow.errors import OWN_BUG_EXIT, raised_in_own_code
from workflow.measure.disturbance import Probe
from workflow.models.registry import get_model, load_model_files, tolerance_for
from workflow.records.storage import WriteError, atomic_writer, write_text
from workflow.stats.enums import Status


class Unsupported(Exception):
    """Raised while preparing a case that this machine or shape cannot run."""


# The protocol's own stream, apart from model code's prints (proc.protocol_channel).
_CHANNEL: list = []


def emit(event: str, case: str, **data) -> None:
    print(json.dumps({"event": event, "case": case, **data}),
          file=_CHANNEL[0] if _CHANNEL else sys.stdout, flush=True)


def probe_device(kind: str, recipe: str) -> tuple[Device, str | None]:
    """The device a case asks for, or why this machine has none."""
    import torch

    # Only the intx recipe needs torchao's kernel library: probing it imports torchao,
    # about a second that no other case's worker process should pay.
    kernels = parse(recipe).family == "intx-opaque" and torchao_kernels_loaded()
    if kind == "cpu":
        return Device("cpu", torchao_kernels=kernels), None
    if kind == "cuda":
        if not torch.cuda.is_available():
            return Device("cpu", torchao_kernels=kernels), "CUDA is not available on this machine"
        return Device("cuda", torch.cuda.get_device_capability(), torchao_kernels=kernels), None
    return (Device("cpu", torchao_kernels=kernels),
            f"device {kind} is not supported by benchflow's torch backends")


def sync(device: Device) -> None:
    if device.kind == "cuda":
        import torch

        torch.cuda.synchronize()


class Prepared:
    """A case's module ready to call: built, cast, quantized, compiled."""

    def __init__(self, case: dict, backend: dict, device: Device):
        import torch

        w = case["workload"]
        self.case, self.device, self.mode = case, device, w["mode"]
        load_model_files(w.get("model_modules", []))
        model = get_model(w["model"])
        self.recipe = parse(case["recipe"])
        dev = "cuda" if device.kind == "cuda" else "cpu"
        inst = model.build(w["config"], w["dtype"], w["layers"], w["shape"])
        self.flops = inst.flops
        self.module = inst.module.to(dev)
        self.inputs = tuple(x.to(dev) for x in inst.inputs)
        if self.recipe.quantized:
            linears = [m.in_features for m in self.module.modules()
                       if isinstance(m, torch.nn.Linear)]
            why = layer_reason(self.recipe, linears)
            if why:
                raise Unsupported(why)
            apply(self.module, self.recipe, device)
        if self.mode == "training":
            self.module.train()
            self.optimizer = torch.optim.AdamW(self.module.parameters(), lr=1e-4)
        self.callable = self.module
        if backend["kind"] == "inductor":
            self.callable = torch.compile(self.module, mode=backend["compile_mode"],
                                          fullgraph=backend["fullgraph"])

    def forward(self):
        import torch

        with torch.no_grad():
            return self.callable(*self.inputs)

    def train_step(self) -> dict[str, float]:
        """One training iteration with each phase timed on its own (ms)."""
        t0 = time.perf_counter()
        out = self.callable(*self.inputs)
        loss = _first_tensor(out).float().square().mean()
        sync(self.device)
        t1 = time.perf_counter()
        loss.backward()
        sync(self.device)
        t2 = time.perf_counter()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        sync(self.device)
        t3 = time.perf_counter()
        return {"forward": (t1 - t0) * 1e3, "backward": (t2 - t1) * 1e3,
                "optimizer": (t3 - t2) * 1e3}

    def call(self):
        return self.train_step() if self.mode == "training" else self.forward()


def _first_tensor(out):
    from workflow.backends.iree.export import tensor_leaves

    return tensor_leaves(out)[0]


def _numpy_outputs(out) -> list:
    from workflow.backends.iree.export import tensor_leaves, to_numpy

    return [to_numpy(t) for t in tensor_leaves(out)]


def reset_peak_rss() -> bool:
    """Resets the process's RSS high-water mark (Linux: clear_refs 5), so that the peak
    read after a case is that case's, not an earlier case's in the same process."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def graph_stats_compiled(prepared: Prepared) -> dict:
    """aten ops (torch.export of the module as run) and, for torch.compile, Dynamo's
    graph and graph-break counts (torch._dynamo.explain)."""
    import torch

    from workflow.backends.iree.export import graph_stats

    stats: dict = {"aten_ops": 0, "aten_ops_unique": 0, "op_histogram": {},
                   "graph_breaks": None, "graph_count": None}
    try:
        with torch.no_grad():
            prog = torch.export.export(prepared.module, prepared.inputs)
        stats.update(graph_stats(prog.graph))
    except Exception as exc:  # quantized tensor subclasses may not export; say so
        stats["export_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    if prepared.callable is not prepared.module:
        explained = torch._dynamo.explain(prepared.module)(*prepared.inputs)
        stats["graph_count"] = explained.graph_count
        stats["graph_breaks"] = explained.graph_break_count
        stats["break_reasons"] = [str(r.reason)[:200] for r in explained.break_reasons][:10]
        torch._dynamo.reset()  # the timed compile must start cold
    return stats


def characterize(case: dict, backend: dict, plan: dict) -> dict:
    """Everything about a case but its steady-state time: accuracy, SQNR, first call,
    compile time, peak memory, profiles, graph statistics.

    memory.peak_bytes is this case's alone: the peak (the process's RSS high-water
    mark, or on CUDA the caching allocator's peak) is reset right before the case's
    module is built and read right after its first call. It covers building, casting
    and quantizing the module, torch.compile's compilation and the first call (for
    training, also the eval-mode forward pass that measures accuracy before it); it
    does not cover the fp32 reference run before it, nor the graph statistics
    (torch.export, Dynamo's explain) and the unquantized SQNR baseline after it. RSS
    is reset to the current resident set, not to zero, so it still counts what the
    process held before (the interpreter, torch, the reference's outputs).
    """
    import torch

    from workflow.stats.accuracy import compare, with_sqnr

    w = case["workload"]
    load_model_files(w.get("model_modules", []))
    device, why = probe_device(w["device"], case["recipe"])
    recipe = parse(case["recipe"])
    why = why or device_reason(recipe, device=device, dtype=w["dtype"])
    if why:
        return {"status": Status.UNSUPPORTED, "reason": why}
    torch.set_num_threads(plan["threads"])
    reference = _reference_outputs(w)
    # The case's peak memory starts here (see the docstring).
    _reset_peak_memory(device)
    try:
        prepared = Prepared(case, backend, device)
    except Unsupported as exc:
        return {"status": Status.UNSUPPORTED, "reason": str(exc)}
    actual, first_s, memory = _first_call(prepared, device)
    tol = tolerance_for(w, plan["tolerances"])
    accuracy = {**compare(actual, reference, **tol), "reference": "torch-eager-fp32"}
    if recipe.quantized:  # judged as torchao judges it: SQNR against the unquantized module
        accuracy = with_sqnr(accuracy, _sqnr_against_baseline(prepared, w, actual),
                             "baseline recipe", min_sqnr_db(recipe, plan["tolerances"]))
    profile = write_profiles(prepared, case, plan, w)
    # The per-op profile (ops_profile.py): warm, apart from the timing's processes.
    kernels = profile_ops(prepared.call, lambda: sync(device), plan["measurement"],
                          cuda=device.kind == "cuda")
    # Last: torch._dynamo.explain resets Dynamo, so the compiled module is not called
    # again after it (the profiles above run it warm).
    graph = graph_stats_compiled(prepared)
    return {
        "status": Status.OK, "graph": graph, "accuracy": accuracy, "memory": memory,
        "first_run_ms": first_s * 1e3, "flops": prepared.flops,
        "compile_seconds": first_s if backend["kind"] == "inductor" else None,
        "profile": profile, "kernels": kernels, "device_capability": device.cuda_capability,
        **_gpu_details(device),
    }


def _reference_outputs(w: dict) -> list:
    """The fp32 eager module's outputs that the case's accuracy is measured against."""
    import torch

    ref = get_model(w["model"]).build(w["config"], "f32", w["layers"], w["shape"])
    with torch.no_grad():
        return _numpy_outputs(ref.module(*ref.inputs))


def _reset_peak_memory(device: Device) -> None:
    import torch

    if device.kind == "cuda":
        torch.cuda.reset_peak_memory_stats()
    reset_peak_rss()


def _peak_memory(device: Device) -> dict:
    """The peak since _reset_peak_memory: the caching allocator's on CUDA, else RSS."""
    import torch

    if device.kind == "cuda":
        return {"peak_bytes": int(torch.cuda.max_memory_allocated()), "kind": "allocator"}
    return {"peak_bytes": peak_rss_bytes(), "kind": "rss"}


def _first_call(prepared: Prepared, device: Device) -> tuple[list, float, dict]:
    """The case's first call, timed apart: the outputs to check (for training those of
    an eval-mode forward pass before it), its seconds, and the case's peak memory."""
    if prepared.mode == "training":
        # Accuracy of the forward pass before any optimizer step changes the weights.
        prepared.module.eval()
        actual = _numpy_outputs(prepared.forward())
        prepared.module.train()
    t0 = time.perf_counter()
    out = prepared.call()  # torch.compile compiles here: the first call is timed apart
    sync(device)
    first_s = time.perf_counter() - t0
    # ... and ends here, before the graph statistics and the SQNR baseline.
    memory = _peak_memory(device)
    if prepared.mode != "training":
        actual = _numpy_outputs(out)
    return actual, first_s, memory


def _sqnr_against_baseline(prepared: Prepared, w: dict, actual: list) -> float:
    """SQNR against the same module unquantized, in the same dtype and backend family:
    the error the recipe adds, apart from the dtype's own."""
    import torch

    from workflow.stats.accuracy import worst_sqnr_db

    base = get_model(w["model"]).build(w["config"], w["dtype"], w["layers"], w["shape"])
    with torch.no_grad():
        baseline = _numpy_outputs(base.module.to(prepared.inputs[0].device)(*prepared.inputs))
    del base
    return worst_sqnr_db(actual, baseline)


def _gpu_details(device: Device) -> dict:
    """The GPU a CUDA case ran on; nothing on the CPU."""
    import torch

    if device.kind != "cuda":
        return {}
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"gpu_name": props.name, "gpu_count": torch.cuda.device_count(),
            "gpu_memory_bytes": int(props.total_memory)}


def write_profiles(prepared: Prepared, case: dict, plan: dict, w: dict) -> dict | None:
    visualizer = w["memory_visualizer"]
    if not (w["profiler"] or w["memory_profiler"] or visualizer):
        return None
    import torch

    out_dir = Path(plan["artifacts_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = case["workload"]["id"]
    profile: dict = {"trace": None, "memory_snapshot": None, "memory_snapshot_status": None,
                     "memory_visualization": None, "memory_visualization_status": None}
    if w["profiler"]:
        profile["trace"] = str(write_trace(prepared.call, lambda: sync(prepared.device),
                                           out_dir / f"{stem}.trace.json",
                                           cuda=prepared.device.kind == "cuda"))
    if w["memory_profiler"]:
        if prepared.device.kind == "cuda":
            torch.cuda.memory._record_memory_history(max_entries=100000)
            for _ in range(3):
                prepared.call()
            sync(prepared.device)
            path = out_dir / f"{stem}.memory_snapshot.pickle"
            with atomic_writer(path) as fh:
                torch.cuda.memory._dump_snapshot(fh.name)
            torch.cuda.memory._record_memory_history(enabled=None)
            profile["memory_snapshot"] = str(path)
            if visualizer:
                # torchao's enable_memory_visualizer: an HTML view of the snapshot.
                import pickle

                from torch.cuda._memory_viz import trace_plot

                html = out_dir / f"{stem}.memory_viz.html"
                with path.open("rb") as fh:
                    write_text(html, trace_plot(pickle.load(fh)))
                profile["memory_visualization"] = str(html)
        else:
            profile["memory_snapshot_status"] = (
                "unsupported: CUDA memory snapshots need a CUDA device; this case ran on the CPU")
    if visualizer and not profile.get("memory_visualization"):
        profile["memory_visualization_status"] = (
            "unsupported: the memory visualization renders a CUDA memory snapshot; this case "
            "ran on the CPU" if w["memory_profiler"] else
            "not run: enable_memory_visualizer takes effect with enable_memory_profiler only "
            "(as in torchao)")
    return profile


def _prepare_warm(case: dict, backend: dict, plan: dict) -> tuple[Prepared, int]:
    """A case's module built, compiled and warmed up; also the warm-up calls it took."""
    import torch

    device, _ = probe_device(case["workload"]["device"], case["recipe"])
    torch.set_num_threads(plan["threads"])
    m = plan["measurement"]
    prepared = Prepared(case, backend, device)
    calls, t0 = 0, time.perf_counter()
    while calls < m["torch_warmup_calls"] or time.perf_counter() - t0 < m["torch_warmup_s"]:
        prepared.call()
        calls += 1
    sync(device)
    return prepared, calls


def timed_block(prepared: Prepared, threads: int, min_run_time: float) -> dict:
    """One timed block of a warm module: torch.utils.benchmark's blocked_autorange
    (inference) or training steps with each phase timed, for at least min_run_time s."""
    import torch.utils.benchmark as tb

    if prepared.mode == "training":
        phases: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": []}
        totals = []
        start = time.perf_counter()
        while time.perf_counter() - start < min_run_time or len(totals) < 3:
            step = prepared.train_step()
            for k, v in step.items():
                phases[k].append(v)
            totals.append(sum(step.values()))
        return {"median_ms": statistics.median(totals), "iterations": len(totals),
                "phases_ms": {k: statistics.median(v) for k, v in phases.items()}}
    timer = tb.Timer(stmt="fn()", globals={"fn": prepared.forward}, num_threads=threads)
    measured = timer.blocked_autorange(min_run_time=min_run_time)
    return {"median_ms": measured.median * 1e3,
            "iterations": measured.number_per_run * len(measured.times)}


def time_case(case: dict, backend: dict, plan: dict) -> dict:
    """One invocation of one case: warm-up, then the steady state."""
    prepared, calls = _prepare_warm(case, backend, plan)
    block = observed_block(prepared, plan, plan["measurement"]["torch_min_run_time_s"])
    return {**block, "warmup_calls": calls}


def observed_block(prepared: Prepared, plan: dict, seconds: float) -> dict:
    """timed_block, observed for outside load in this process (the timed block runs
    here, on this process's threads: measure/disturbance.Probe timed="self"): the
    block's figures, its CPU and wall seconds, and what disturbed it."""
    with Probe(plan["measurement"]["disturbed_share"], timed="self") as probe:
        block = timed_block(prepared, plan["threads"], seconds)
    seen = probe.result()
    return {**block, "cpu_s": seen["cpu_s"], "wall_s": seen["wall_s"], "disturbance": seen}


def serve(plan: dict, commands=sys.stdin) -> None:
    """A long-lived worker of an A/B pair (stages/ab_torch.py): the plan's one case is
    prepared once (built, quantized, compiled, warmed up), then each "time" line read from
    `commands` runs one timed block of plan["block_s"] seconds, and a "profile" line the
    case's per-op profile (ops_profile.profile_ops: a "profile" line, its `kernels`).
    Lines on stdout: "start", then "ready" (or a "result" saying why the case cannot run,
    and the end), then one "block" per "time" command: its median, iterations, the CPU
    seconds (every thread of this process) and wall seconds of the block, and what
    disturbed it (observed here, as time_case does: the timed block runs on this
    process's threads)."""
    case = plan["cases"][0]
    emit("start", case["id"])
    w = case["workload"]
    device, why = probe_device(w["device"], case["recipe"])
    why = why or device_reason(parse(case["recipe"]), device=device, dtype=w["dtype"])
    if why:
        emit("result", case["id"], result={"status": Status.UNSUPPORTED, "reason": why})
        return
    try:
        prepared, calls = _prepare_warm(case, plan["backend"], plan)
    except Unsupported as exc:
        emit("result", case["id"], result={"status": Status.UNSUPPORTED, "reason": str(exc)})
        return
    emit("ready", case["id"], warmup_calls=calls)
    for line in commands:
        if line.strip() == "profile":  # after the rounds: the side's per-op profile
            emit("profile", case["id"], result=profile_ops(
                prepared.call, lambda: sync(prepared.device), plan["measurement"],
                cuda=prepared.device.kind == "cuda"))
        elif line.strip() == "time":
            emit("block", case["id"], result=observed_block(prepared, plan, plan["block_s"]))
        else:
            raise ValueError(f"serve: unknown command {line.strip()!r}; expected 'time' "
                             "or 'profile'")


def _failed(exc: Exception) -> dict:
    """A case's exception as its failed result; benchflow's own bug ends the worker with
    OWN_BUG_EXIT instead (the parent fails the job: errors.OwnBug). A file it could not
    write (WriteError: a full or read-only disk) is the machine's failure, the case's."""
    traceback.print_exc(file=sys.stderr)
    if raised_in_own_code(exc) and not isinstance(exc, WriteError):
        sys.exit(OWN_BUG_EXIT)
    return {"status": Status.FAILED, "error": f"{type(exc).__name__}: {exc}"}


def main(argv: list[str]) -> None:
    # A case that crashes the interpreter (a segfault in a kernel or a model) leaves its
    # Python traceback in the job's log, where the parent's error message quotes it.
    faulthandler.enable(file=sys.stderr)
    _CHANNEL[:] = [protocol_channel()]
    plan_path, pass_name = argv
    plan = json.loads(Path(plan_path).read_text())
    if pass_name == "serve":
        try:
            serve(plan)
        except Exception as exc:
            emit("result", plan["cases"][0]["id"], result=_failed(exc))
        return
    fn = characterize if pass_name == "characterize" else time_case
    for case in plan["cases"]:
        emit("start", case["id"])
        try:
            result = fn(case, plan["backend"], plan)
        except Exception as exc:
            result = _failed(exc)
        emit("result", case["id"], result=result)


if __name__ == "__main__":
    main(sys.argv[1:])
