"""Timing slots in the workflow (the slots themselves: workflow/slots/). The Snakefile
registers as many `bench_slot` units as this machine has slots; each timing rule asks
for the slots its SKU uses (one GPU slot, one CPU slot, or every slot where a CPU SKU
times alone) and the cores of them; the job claims concrete slots and pins itself to
them (`timing_slot`, called by the scripts of the timing rules)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

from workflow.backends.proc import capture
from workflow.paths import RESULTS
from workflow.planning.placement import GPU_TARGETS
from workflow.slots.claim import claimed, pin
from workflow.slots.machine import Machine, Slot, machine_slots
from workflow.suite.batches import MIN_TORCH_BATCH_CASES, by_workload_hash
from workflow.suite.load import batch_torch_cases, torch_skus

# A job asking this many threads gets every core (Snakemake caps it at --cores).
EVERY_CORE = 1 << 16


GPU_DEVICES = ("cuda", "xpu")


def on_gpu(sku: dict, workloads=()) -> bool:
    """Whether a job of the SKU measures on a GPU: its IREE target, its torch device, or
    the device of one of its cases' workloads (a torchao file names it per entry)."""
    return ((sku.get("iree") or {}).get("target_backend") in GPU_TARGETS
            or (sku.get("torch") or {}).get("device") in GPU_DEVICES
            or any(_device(w) in GPU_DEVICES for w in workloads))


def _device(workload) -> str | None:
    return workload.get("device") if isinstance(workload, dict) else getattr(
        workload, "device", None)


def torch_batch_on_gpu(suite, sku: str, batch: str) -> bool:
    return on_gpu(suite.sku(sku), [c.workload for c in suite.torch_batch(sku, batch)])


@cache
def this_machine(cpu_slots: int) -> Machine:
    return machine_slots(capture, cpu_slots)


def pool(config: dict, gpu: bool) -> tuple[tuple[Slot, ...], int]:
    """The slots a SKU's timing job chooses from and how many of them it holds: a GPU
    SKU one GPU slot where the machine has GPUs; a CPU SKU one CPU slot where the suite
    asks for several (cpu_slots) and the machine has no GPU slot to disturb, else every
    slot (it times alone, as a CPU measurement beside anything is not comparable)."""
    machine = this_machine(config.get("cpu_slots", 1))
    if gpu and machine.gpu_slots:
        return machine.gpu_slots, 1
    if machine.gpu_slots:
        return machine.gpu_slots, len(machine.gpu_slots)
    return machine.cpu_slots, 1 if len(machine.cpu_slots) > 1 else len(machine.cpu_slots)


def slot_count(config: dict) -> int:
    """`bench_slot` units of this machine: its GPU slots, else its CPU slots."""
    machine = this_machine(config.get("cpu_slots", 1))
    return len(machine.gpu_slots) or len(machine.cpu_slots)


def slots_needed(config: dict, gpu: bool) -> int:
    """The `bench_slot` units a timing job holds (`gpu`: it measures on a GPU)."""
    slots, need = pool(config, gpu)
    return need if need < len(slots) else slot_count(config)


def timing_threads(config: dict, gpu: bool) -> int:
    """Cores a timing job of the SKU asks Snakemake for: its slot's, so that compiles
    run on the cores no busy slot holds; every core where it holds the whole machine."""
    slots, need = pool(config, gpu)
    if need >= len(slots):
        return EVERY_CORE
    return max(1, min(len(s.cpus) for s in slots))


# How many torch batches of a GPU SKU and of a CPU SKU time at once, as the run's
# planning process found it ({"gpu": 8, "cpu": 1}): every job of the run inherits it, so
# that a SLURM job, which reads the Snakefile again on its node, cuts the same batches.
BATCH_SLOTS_ENV = "BENCHFLOW_BATCH_SLOTS"


def concurrent_batches(config: dict, slurm: bool) -> dict[str, int]:
    """How many batches of a GPU and of a CPU SKU this machine times at once (pool).
    Under SLURM one each: every job gets a GPU (or a node) of its own, but how many run
    at once is the cluster's to decide, unknown here, so the batches keep the size rule
    (torch_batch_size)."""
    if slurm:
        return {"gpu": 1, "cpu": 1}
    out = {}
    for kind, gpu in (("gpu", True), ("cpu", False)):
        slots, need = pool(config, gpu)
        out[kind] = max(1, len(slots) // max(1, need))
    return out


def spread_over_slots(suite, *, main: bool, slurm: bool, environ=os.environ) -> None:
    """Cuts the suite's torch batches again so that every timing slot of a SKU's device
    class gets one (batches.by_workload_hash). The planning process (`main`) decides the
    slots and leaves them in the environment for the run's jobs; a job that reads the
    Snakefile again takes them from there (none: one slot, the size rule's batches)."""
    import json

    if main:
        found = concurrent_batches(suite.config, slurm)
        environ[BATCH_SLOTS_ENV] = json.dumps(found)
    else:
        try:
            found = json.loads(environ.get(BATCH_SLOTS_ENV) or "{}")
        except ValueError:
            found = {}
    slots = {sku: int(found.get("gpu" if on_gpu(suite.sku(sku), [c.workload for c in cases])
                                else "cpu", 1))
             for sku, cases in torch_skus(suite).items()}
    batch_torch_cases(suite, slots)


def batch_lines(suite) -> list[str]:
    """What the spread made of each SKU's torch batches, said once when the run starts
    (`snakemake -n` too), where more than one slot measures them."""
    lines = []
    size = suite.config["torch_batch_size"]
    for sku, cases in torch_skus(suite).items():
        slots = suite.torch_batch_slots.get(sku, 1)
        if slots <= 1:
            continue
        sizes = sorted(len(m) for (s, _), m in suite.torch_batches.items() if s == sku)
        by_size = len(by_workload_hash(cases, size))
        spread = f"{sizes[0]}" if sizes[0] == sizes[-1] else f"{sizes[0]} to {sizes[-1]}"
        lines.append(
            f"benchflow: torch batches of SKU {sku}: {len(sizes)} of {spread} "
            f"cases ({len(cases)} cases; {slots} timing slots measure them at "
            f"once; at least {MIN_TORCH_BATCH_CASES} cases a batch, so that a worker's start "
            f"is paid rarely; torch_batch_size {size} alone would cut {by_size})")
    return lines


def plan_lines(config: dict) -> list[str]:
    """What the run's slots are, said once when it starts."""
    machine = this_machine(config.get("cpu_slots", 1))
    lines = list(machine.notes)
    if machine.gpu_slots:
        lines.append(f"benchflow: {len(machine.gpu_slots)} GPU timing slots "
                     + ", ".join(f"{s.gpu.uuid} cpus {_cpus(s.cpus)}" for s in machine.gpu_slots))
    elif len(machine.cpu_slots) > 1:
        lines.append(f"benchflow: {len(machine.cpu_slots)} CPU timing slots (cpu_slots) "
                     + ", ".join(f"cpus {_cpus(s.cpus)}" for s in machine.cpu_slots))
    return lines


def _cpus(cpus: tuple[int, ...]) -> str:
    return f"{cpus[0]}-{cpus[-1]}" if len(cpus) > 1 else ",".join(map(str, cpus))


@contextmanager
def timing_slot(config: dict, gpu: bool, root: str = RESULTS) -> Iterator[dict]:
    """A timing job's slot, held and pinned to until the block ends; yields its record
    (also in the environment, where the case records and IREE's --device read it)."""
    slots, need = pool(config, gpu)
    with claimed(slots, need, root) as held:
        # Holding every slot, the job has the machine: every CPU it may use, not only
        # the slots' shares (which leave a remainder to compiles).
        record = pin(held, every_cpu=set(os.sched_getaffinity(0)) if need > 1 else None)
        print(f"benchflow: timing slot {record['index']}"
              + (f" GPU {record['gpu']['uuid']}" if record["gpu"] else "")
              + f" cpus {_cpus(tuple(record['cpus']))}", file=sys.stderr, flush=True)
        yield record
