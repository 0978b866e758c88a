"""Claiming a slot at run time and pinning the job to it.

Snakemake's `bench_slot` resource caps how many timing jobs run at once but cannot say
WHICH slot a job got, so each timing job claims concrete slots itself: an exclusive
fcntl lock on one file per slot (first free wins). The kernel drops a lock when its
process ends, so a job killed by SLURM, a crash or Ctrl-C leaves no stale slot."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from workflow.slots.machine import Slot

# The claimed slot of this process and its children (JSON of Slot.record()): read by
# the IREE device flag (backends) and the case records' provenance (records).
SLOT_ENV = "BENCHFLOW_SLOT"
POLL_S = 0.2


def lock_dir(root: str | Path) -> Path:
    """Where a machine's slot locks live: per host, as a shared file system's locks
    would otherwise make jobs on two nodes wait for one another."""
    return Path(root) / ".slots" / socket.gethostname()


def lock_name(slot: Slot) -> str:
    """A slot's lock by what it holds, not its index: two SLURM jobs on one node each see
    only their own GPU (slot 0 to both), and must not wait for one another."""
    if slot.gpu is not None:
        return f"gpu-{slot.gpu.uuid}.lock"
    return f"cpus-{'-'.join(map(str, slot.cpus)) or 'all'}.lock"


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _release(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)  # closing the descriptor drops its flock


@contextmanager
def claimed(slots: tuple[Slot, ...], need: int, root: str | Path, *,
            wait_s: float | None = None) -> Iterator[tuple[Slot, ...]]:
    """Holds `need` of `slots` (the first free ones) until the block ends. A job that
    finds too few free takes none and tries again (two jobs that each want every slot
    never hold half each); TimeoutError after `wait_s` (None: wait as long as it takes,
    as Snakemake's resource count means a slot frees soon)."""
    if not 1 <= need <= len(slots):
        raise ValueError(f"need {need} of {len(slots)} slots")
    folder = lock_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    deadline = None if wait_s is None else time.monotonic() + wait_s
    while True:
        got: list[tuple[Slot, int]] = []
        for slot in slots:
            fd = _try_lock(folder / lock_name(slot))
            if fd is not None:
                got.append((slot, fd))
                if len(got) == need:
                    break
        if len(got) == need:
            break
        _release([fd for _, fd in got])
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"no {need} free of {len(slots)} timing slots in {folder} "
                               f"within {wait_s:g} s")
        time.sleep(POLL_S)
    try:
        yield tuple(slot for slot, _ in got)
    finally:
        _release([fd for _, fd in got])


def combined(slots: tuple[Slot, ...], every_cpu: set[int] | None = None) -> dict:
    """The record of what a job holds: one slot's; for several (a CPU job that holds
    the whole machine) the first's index, no GPU, and `every_cpu` (else their CPUs)."""
    record = slots[0].record()
    if len(slots) > 1:
        record["gpu"] = None
        record["cpus"] = sorted(every_cpu or {c for s in slots for c in s.cpus})
        record["slots"] = [s.index for s in slots]
    return record


def pin(slots: tuple[Slot, ...], environ=os.environ, every_cpu: set[int] | None = None,
        set_affinity=os.sched_setaffinity) -> dict:
    """Pins this process (and so every process it starts) to the slots: their CPUs
    (affinity) and, for one slot, its GPU (visible devices); returns the record it
    publishes in SLOT_ENV."""
    record = combined(slots, every_cpu)
    if record["cpus"]:
        set_affinity(0, record["cpus"])
    if len(slots) == 1:
        environ.update(slots[0].env())
    environ[SLOT_ENV] = json.dumps(record, sort_keys=True)
    return record


def current(environ=os.environ) -> dict | None:
    """The slot this process was pinned to, None when it was not (a job run by hand)."""
    text = environ.get(SLOT_ENV)
    if not text:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def iree_device(device: str, environ=os.environ) -> str:
    """IREE's --device for the claimed slot: a bare `cuda` names the slot's GPU by UUID
    (cuda://GPU-...), as an index would count the devices CUDA_VISIBLE_DEVICES leaves.
    Any other device, one that names its own, or no claimed GPU: unchanged (`hip` sees
    only the slot's GPU through ROCR_VISIBLE_DEVICES)."""
    gpu = (current(environ) or {}).get("gpu")
    if device == "cuda" and isinstance(gpu, dict) and gpu.get("vendor") == "nvidia":
        return f"cuda://{gpu['uuid']}"
    return device
