"""What a torch case is besides its steady-state time: support, accuracy against the
fp32 eager reference, SQNR against the unquantized module, first call and compile time,
peak memory, profiler artifacts, the per-op profile, graph statistics (worker.py runs
it once per case, in the process that then times the case)."""

from __future__ import annotations

import time
from pathlib import Path

from workflow.backends.torch.ops_profile import profile_ops, write_trace
from workflow.backends.torch.prepared import (
    Prepared,
    Unsupported,
    numpy_outputs,
    probe_device,
    sync,
    training_loss,
)
from workflow.backends.torch.recipes import (
    Device,
    device_reason,
    min_sqnr_db,
    parse,
)
from workflow.measure.cost import Cost
from workflow.models.flops import counted_forward
from workflow.models.registry import get_model, load_model_files, tolerance_for
from workflow.records.storage import atomic_writer, write_text
from workflow.stats.enums import Status


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
    """Everything about a case but its steady-state time (characterized), with its graph
    statistics."""
    result, prepared = characterized(case, backend, plan, Cost())
    if prepared is not None:
        result["graph"] = graph_stats_compiled(prepared)
    return result


def characterized(case: dict, backend: dict, plan: dict,
                   cost: Cost) -> tuple[dict, Prepared | None]:
    """Everything about a case but its steady-state time and graph statistics: accuracy,
    SQNR, first call, compile time, peak memory, profiles; and the case's module, warm
    (None when the case cannot run here).

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
        return {"status": Status.UNSUPPORTED, "reason": why}, None
    torch.set_num_threads(plan["threads"])
    with cost.phase("accuracy_s"):
        reference, reference_flops = _reference_outputs(w)
    # The case's peak memory starts here (see the docstring).
    _reset_peak_memory(device)
    try:
        prepared = Prepared(case, backend, device, cost)
    except Unsupported as exc:
        return {"status": Status.UNSUPPORTED, "reason": str(exc)}, None
    compiled = backend["kind"] == "inductor"
    with cost.phase("compile_s" if compiled else "first_call_s"):
        actual, first_s, memory = _first_call(prepared, device)
    with cost.phase("accuracy_s"):
        tol = tolerance_for(w, plan["tolerances"])
        accuracy = {**compare(actual, reference, **tol), "reference": "torch-eager-fp32"}
        if recipe.quantized:  # judged as torchao judges it: SQNR against the unquantized module
            accuracy = with_sqnr(accuracy, _sqnr_against_baseline(prepared, w, actual),
                                 "baseline recipe", min_sqnr_db(recipe, plan["tolerances"]))
    with cost.phase("profile_s"):
        profile = write_profiles(prepared, case, plan, w)
        # The per-op profile (ops_profile.py): warm, before the timed invocations.
        kernels = profile_ops(prepared.call, lambda: sync(device), plan["measurement"],
                              cuda=device.kind == "cuda")
    return {
        "status": Status.OK, "accuracy": accuracy, "memory": memory,
        "first_run_ms": first_s * 1e3, "flops": reference_flops,
        "compile_seconds": first_s if compiled else None,
        "profile": profile, "kernels": kernels, "device_capability": device.cuda_capability,
        **_gpu_details(device),
    }, prepared


def _reference_outputs(w: dict) -> tuple[list, float | None]:
    """The fp32 eager module's outputs that the case's accuracy is measured against, and
    the FLOPs of the case's timed call: a forward's (the model's own figure, else counted
    in this call: models/flops), or a training case's whole step (step_flops)."""
    import torch

    ref = get_model(w["model"]).build(w["config"], "f32", w["layers"], w["shape"])
    with torch.no_grad():
        outputs, flops = counted_forward(ref.module, ref.inputs, ref.flops)
        outputs = numpy_outputs(outputs)
    if w["mode"] == "training":
        flops = step_flops(ref.module, ref.inputs)
    return outputs, flops


def step_flops(module, inputs: tuple) -> float | None:
    """The FLOPs of one training step (the timed call of a training case, as
    Prepared.train_step makes it): torch's count of its forward and backward
    (torch.utils.flop_counter, 2 per multiply-add; the optimizer's elementwise update
    and the loss are not counted). The backward computes each layer's weight gradient
    and, below the first layer, its input's, each a product the size of the forward's:
    about 3 times the forward's FLOPs for a deep model, 2 for one layer. A step's
    time over the forward's FLOPs alone would read 2 to 3 times too low."""
    from torch.utils.flop_counter import FlopCounterMode

    module.train()
    counter = FlopCounterMode(display=False)
    with counter:
        training_loss(module(*inputs)).backward()
    module.zero_grad(set_to_none=True)
    return float(counter.get_total_flops()) or None


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
        actual = numpy_outputs(prepared.forward())
        prepared.module.train()
    t0 = time.perf_counter()
    out = prepared.call()  # torch.compile compiles here: the first call is timed apart
    sync(device)
    first_s = time.perf_counter() - t0
    # ... and ends here, before the graph statistics and the SQNR baseline.
    memory = _peak_memory(device)
    if prepared.mode != "training":
        actual = numpy_outputs(out)
    return actual, first_s, memory


def _sqnr_against_baseline(prepared: Prepared, w: dict, actual: list) -> float:
    """SQNR against the same module unquantized, in the same dtype and backend family:
    the error the recipe adds, apart from the dtype's own."""
    import torch

    from workflow.stats.accuracy import worst_sqnr_db

    base = get_model(w["model"]).build(w["config"], w["dtype"], w["layers"], w["shape"])
    with torch.no_grad():
        baseline = numpy_outputs(base.module.to(prepared.inputs[0].device)(*prepared.inputs))
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
    # A batch holds every backend and recipe of its SKU: the three name a case's files.
    stem = f"{case['workload']['id']}.{case['backend']}.{case['recipe']}"
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


