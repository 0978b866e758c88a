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
from workflow.slots.claim import claimed, pin
from workflow.slots.machine import Machine, Slot, machine_slots
from workflow.stages.placement import GPU_TARGETS

# A job asking this many threads gets every core (Snakemake caps it at --cores).
EVERY_CORE = 1 << 16


def gpu_sku(sku: dict) -> bool:
    """Whether the SKU measures on a GPU (its IREE target or its torch device)."""
    return ((sku.get("iree") or {}).get("target_backend") in GPU_TARGETS
            or (sku.get("torch") or {}).get("device") in ("cuda", "xpu"))


@cache
def this_machine(cpu_slots: int) -> Machine:
    return machine_slots(capture, cpu_slots)


def pool(config: dict, sku: dict) -> tuple[tuple[Slot, ...], int]:
    """The slots a SKU's timing job chooses from and how many of them it holds: a GPU
    SKU one GPU slot where the machine has GPUs; a CPU SKU one CPU slot where the suite
    asks for several (cpu_slots) and the machine has no GPU slot to disturb, else every
    slot (it times alone, as a CPU measurement beside anything is not comparable)."""
    machine = this_machine(config.get("cpu_slots", 1))
    if gpu_sku(sku) and machine.gpu_slots:
        return machine.gpu_slots, 1
    if machine.gpu_slots:
        return machine.gpu_slots, len(machine.gpu_slots)
    return machine.cpu_slots, 1 if len(machine.cpu_slots) > 1 else len(machine.cpu_slots)


def slot_count(config: dict) -> int:
    """`bench_slot` units of this machine: its GPU slots, else its CPU slots."""
    machine = this_machine(config.get("cpu_slots", 1))
    return len(machine.gpu_slots) or len(machine.cpu_slots)


def slots_needed(config: dict, sku: dict) -> int:
    """The `bench_slot` units a timing job of the SKU holds."""
    slots, need = pool(config, sku)
    return need if need < len(slots) else slot_count(config)


def timing_threads(config: dict, sku: dict) -> int:
    """Cores a timing job of the SKU asks Snakemake for: its slot's, so that compiles
    run on the cores no busy slot holds; every core where it holds the whole machine."""
    slots, need = pool(config, sku)
    if need >= len(slots):
        return EVERY_CORE
    return max(1, min(len(s.cpus) for s in slots))


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
def timing_slot(config: dict, sku: dict, root: str = RESULTS) -> Iterator[dict]:
    """A timing job's slot, held and pinned to until the block ends; yields its record
    (also in the environment, where the case records and IREE's --device read it)."""
    slots, need = pool(config, sku)
    with claimed(slots, need, root) as held:
        # Holding every slot, the job has the machine: every CPU it may use, not only
        # the slots' shares (which leave a remainder to compiles).
        record = pin(held, every_cpu=set(os.sched_getaffinity(0)) if need > 1 else None)
        print(f"benchflow: timing slot {record['index']}"
              + (f" GPU {record['gpu']['uuid']}" if record["gpu"] else "")
              + f" cpus {_cpus(tuple(record['cpus']))}", file=sys.stderr, flush=True)
        yield record
