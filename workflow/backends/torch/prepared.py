"""A torch case made ready to call (built, cast, quantized, compiled), how it is
warmed up and timed, and the record's `cost` of its phases (the worker's parts:
worker.py)."""

from __future__ import annotations

import random
import statistics
import time

from workflow.backends.torch.recipes import (
    Device,
    apply,
    layer_reason,
    parse,
    torchao_kernels_loaded,
)
from workflow.measure.cost import Cost
from workflow.measure.disturbance import Probe
from workflow.models.registry import get_model, load_model_files


class Unsupported(Exception):
    """Raised while preparing a case that this machine or shape cannot run."""


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

    def __init__(self, case: dict, backend: dict, device: Device, cost: Cost | None = None):
        import torch

        cost = cost or Cost()
        w = case["workload"]
        self.case, self.device, self.mode = case, device, w["mode"]
        load_model_files(w.get("model_modules", []))
        model = get_model(w["model"])
        self.recipe = parse(case["recipe"])
        dev = "cuda" if device.kind == "cuda" else "cpu"
        with cost.phase("build_s"):
            inst = model.build(w["config"], w["dtype"], w["layers"], w["shape"])
            self.module = inst.module.to(dev)
            self.inputs = tuple(x.to(dev) for x in inst.inputs)
        self.pad = None  # fresh_buffers' allocation, kept while its inputs live
        if self.recipe.quantized:
            linears = [m.in_features for m in self.module.modules()
                       if isinstance(m, torch.nn.Linear)]
            why = layer_reason(self.recipe, linears)
            if why:
                raise Unsupported(why)
            with cost.phase("quantize_s"):
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
        loss = training_loss(out)
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


def training_loss(out):
    """A training step's loss: the mean square of the first output (no labels: what is
    measured is the step's work, not learning)."""
    return _first_tensor(out).float().square().mean()


def _first_tensor(out):
    from workflow.backends.iree.export import tensor_leaves
    from workflow.models.outputs import checked_outputs

    return tensor_leaves(checked_outputs(out))[0]


def numpy_outputs(out) -> list:
    """A forward's outputs as arrays; one that is no tensor (None from a forgotten
    `return`, a string) fails the case (models/outputs.py), never an empty list that an
    empty reference agrees with."""
    from workflow.backends.iree.export import tensor_leaves, to_numpy
    from workflow.models.outputs import checked_outputs

    return [to_numpy(t) for t in tensor_leaves(checked_outputs(out))]


def allow_compiles(count: int) -> None:
    """Lets Dynamo compile a model's forward once per case of a batch. Dynamo compiles one
    code object at most recompile_limit times (8) per process and then runs it eager,
    or with fullgraph=True fails: a batch's cases of one model class (each shape, recipe
    and mode) share that code, so its ninth compiled case would be timed eager under a
    compiled name. More cache entries cost a timed call nothing: Dynamo moves the entry
    that matched to the front of the code's list, and a case's warm-up calls make its
    own the first checked."""
    import torch._dynamo

    cfg = torch._dynamo.config
    cfg.recompile_limit = max(cfg.recompile_limit, count + 8)
    cfg.accumulated_recompile_limit = max(cfg.accumulated_recompile_limit, count + 256)


def warm_up(prepared: Prepared, m: dict) -> int:
    """Calls until torch_warmup_calls and torch_warmup_s are both reached; their count."""
    calls, t0 = 0, time.perf_counter()
    while calls < m["torch_warmup_calls"] or time.perf_counter() - t0 < m["torch_warmup_s"]:
        prepared.call()
        calls += 1
    sync(prepared.device)
    return calls


def prepare_warm(case: dict, backend: dict, plan: dict) -> tuple[Prepared, int]:
    """A case's module built, compiled and warmed up; also the warm-up calls it took."""
    import torch

    device, _ = probe_device(case["workload"]["device"], case["recipe"])
    torch.set_num_threads(plan["threads"])
    prepared = Prepared(case, backend, device)
    return prepared, warm_up(prepared, plan["measurement"])


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


def observed_block(prepared: Prepared, plan: dict, seconds: float) -> dict:
    """timed_block, observed for outside load in this process (the timed block runs
    here, on this process's threads: measure/disturbance.Probe timed="self"): the
    block's figures, its CPU and wall seconds, and what disturbed it."""
    with Probe(plan["measurement"]["disturbed_share"], timed="self") as probe:
        block = timed_block(prepared, plan["threads"], seconds)
    seen = probe.result()
    return {**block, "cpu_s": seen["cpu_s"], "wall_s": seen["wall_s"], "disturbance": seen}


def fresh_buffers(prepared: Prepared) -> None:
    """New input tensors at new addresses, after an allocation of a random size, and on
    the CPU the module's plain weights copied there too: each invocation reads its data
    at its own place in memory (its own physical pages, where a forked child would
    otherwise share its parent's), as a fresh process would, so that a placement's bias
    becomes noise the interval covers (measure/layout.py does the same for an IREE
    module). Quantized weights (tensor subclasses) stay where they are: swapping one
    makes torch.compile compile again. On CUDA only the inputs move: new weight addresses
    would make a CUDA graph record again."""
    import torch

    device = prepared.inputs[0].device if prepared.inputs else torch.device("cpu")
    pad = torch.empty(random.randrange(1, 4096) * 64, dtype=torch.uint8, device=device)
    prepared.inputs = tuple(x.clone() for x in prepared.inputs)
    if device.type == "cpu":
        with torch.no_grad():
            for t in [*prepared.module.parameters(), *prepared.module.buffers()]:
                if type(t.data) is torch.Tensor:
                    t.data = t.data.clone()
    prepared.pad = pad


