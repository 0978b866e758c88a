"""What a machine offers for timing: its GPUs (nvidia-smi, rocm-smi), the CPUs this
process may use, their NUMA nodes (/sys), and the slots made from them."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from workflow.errors import capped

# nvidia-smi's documented csv,noheader rows: "0, GPU-8f6c..., NVIDIA H100 80GB HBM3,
# 00000000:18:00.0". index and uuid identify the GPU; the bus id finds its NUMA node.
NVIDIA_QUERY = ("--query-gpu=index,uuid,name,pci.bus_id", "--format=csv,noheader")
_NVIDIA_ROW = re.compile(r"(\d{1,3}), (GPU-[0-9A-Za-z-]{1,80}), ([^,\x00-\x1f]{1,96}), "
                         r"([0-9A-Fa-f:.]{1,32})")
_WARNING = re.compile(r"\s*warning\b", re.IGNORECASE)
# rocm-smi's JSON: {"card0": {"Unique ID": "0x4b2c...", "PCI Bus": "0000:0C:00.0",
# "Card series": ...}, ...}. ROCm's ROCR_VISIBLE_DEVICES takes "GPU-<unique id hex>".
ROCM_QUERY = ("--showuniqueid", "--showbus", "--showproductname", "--json")
TOOL_TIMEOUT_S = 60
LINE_CHARS = 200
SYS = Path("/sys")
# For tests and plans only: a cpulist ("0-15") that stands for the CPUs this process may
# use, so that a 2-core machine can plan the slots of a 16-core GPU node (a job pinned
# to CPUs the machine lacks would fail: never set it for a real run).
FAKE_CPUS_ENV = "BENCHFLOW_TEST_CPUS"


@dataclass(frozen=True)
class Gpu:
    """One GPU as the vendor's tool lists it."""

    vendor: str  # "nvidia" or "amd"
    index: int
    uuid: str
    name: str
    bus_id: str | None = None


@dataclass(frozen=True)
class Slot:
    """A unit that times alone: a GPU (or none: a CPU slot) and the CPUs of its host work."""

    index: int
    cpus: tuple[int, ...]
    gpu: Gpu | None = None

    def env(self) -> dict[str, str]:
        """What the slot's processes see: only its GPU, by UUID (an index would change
        meaning under a cgroup or a SLURM allocation)."""
        if self.gpu is None:
            return {}
        if self.gpu.vendor == "nvidia":
            return {"CUDA_VISIBLE_DEVICES": self.gpu.uuid}
        return {"ROCR_VISIBLE_DEVICES": self.gpu.uuid}

    def record(self) -> dict:
        """The slot as a case record's provenance.slot holds it."""
        gpu = None if self.gpu is None else {
            "vendor": self.gpu.vendor, "index": self.gpu.index, "uuid": self.gpu.uuid,
            "name": self.gpu.name}
        return {"index": self.index, "gpu": gpu, "cpus": list(self.cpus)}


@dataclass(frozen=True)
class Machine:
    """The slots of a machine, and why it has no GPU slot where it has none."""

    gpu_slots: tuple[Slot, ...]
    cpu_slots: tuple[Slot, ...]
    no_gpu: str | None = None
    notes: list[str] = field(default_factory=list)


Capture = Callable[..., object]  # backends.proc.capture: (argv, *, timeout) -> CompletedProcess


def parse_nvidia(text: str) -> list[Gpu]:
    """GPUs of NVIDIA_QUERY's answer; ValueError naming the first line that is neither
    a row nor a warning."""
    gpus = []
    for line in text.splitlines():
        if not line.strip() or _WARNING.match(line):
            continue
        row = _NVIDIA_ROW.fullmatch(line.strip())
        if row is None:
            raise ValueError(f"not an 'index, uuid, name, pci.bus_id' line of nvidia-smi: "
                             f"{capped(repr(line), LINE_CHARS)}")
        gpus.append(Gpu("nvidia", int(row[1]), row[2], row[3].strip(), row[4]))
    return gpus


def parse_rocm(text: str) -> list[Gpu]:
    """GPUs of rocm-smi's ROCM_QUERY JSON answer; ValueError where it is not that."""
    try:
        cards = json.loads(text)
        gpus = []
        for name, card in cards.items():
            found = re.fullmatch(r"card(\d{1,3})", name)
            if not found:
                continue  # "system" and other non-card entries
            unique = str(card["Unique ID"]).lower().removeprefix("0x")
            if not re.fullmatch(r"[0-9a-f]{1,32}", unique):
                raise ValueError(f"unique id {capped(repr(unique), LINE_CHARS)}")
            gpus.append(Gpu("amd", int(found[1]), f"GPU-{unique}",
                            str(card.get("Card series") or card.get("Card Series") or "AMD GPU"),
                            card.get("PCI Bus")))
        return sorted(gpus, key=lambda g: g.index)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not rocm-smi's --json answer: {capped(str(exc), LINE_CHARS)}") from None


def list_gpus(capture: Capture, *, which=shutil.which) -> tuple[list[Gpu], str | None]:
    """This machine's GPUs (NVIDIA first, else AMD) and why none where it lists none: a
    reason, never an exception."""
    for tool, query, parse in (("nvidia-smi", NVIDIA_QUERY, parse_nvidia),
                               ("rocm-smi", ROCM_QUERY, parse_rocm)):
        path = which(tool)
        if path is None:
            continue
        try:
            proc = capture([path, *query], timeout=TOOL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a probe's failure is a reason, not a crash
            return [], f"{tool} did not answer: {capped(str(exc), LINE_CHARS)}"
        if proc.returncode != 0:
            said = capped(" ".join((proc.stdout + proc.stderr).split()), LINE_CHARS)
            return [], f"{tool} exited with {proc.returncode} ({said})"
        try:
            gpus = parse(proc.stdout)
        except ValueError as exc:
            return [], f"{tool} answered unreadably: {exc}"
        return gpus, None if gpus else f"{tool} lists no GPU"
    return [], "neither nvidia-smi nor rocm-smi is on PATH"


def parse_cpulist(text: str) -> set[int]:
    """A kernel cpulist ("0-3,8,10-11") as a set."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def numa_node(bus_id: str | None, sys_root: Path = SYS) -> set[int] | None:
    """The CPUs of the NUMA node a PCI device hangs on, None where /sys does not say
    (no node, node -1, a bus id nvidia-smi writes with 8 domain digits)."""
    parts = (bus_id or "").lower().split(":")
    if len(parts) != 3:
        return None
    try:
        short = f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
    except ValueError:
        return None
    try:
        node = int((sys_root / "bus/pci/devices" / short / "numa_node").read_text())
        if node < 0:
            return None
        return parse_cpulist((sys_root / f"devices/system/node/node{node}/cpulist").read_text())
    except (OSError, ValueError):
        return None


def split(cpus: list[int], count: int) -> list[tuple[int, ...]]:
    """`count` disjoint, contiguous, equal shares of `cpus`; the remainder belongs to no
    slot (it is where compiles may run beside timing)."""
    size = len(cpus) // count
    return [tuple(cpus[i * size:(i + 1) * size]) for i in range(count)]


def gpu_cpu_sets(gpus: list[Gpu], allowed: set[int], sys_root: Path = SYS) -> list[tuple]:
    """Disjoint CPU sets for the GPUs' slots: each GPU's share of its NUMA node's CPUs
    where /sys names every GPU's node and each node has a CPU for each of its GPUs,
    else an even share of every allowed CPU."""
    nodes = [numa_node(g.bus_id, sys_root) for g in gpus]
    if all(n is not None for n in nodes):
        by_node: dict[frozenset, list[int]] = {}
        for i, node in enumerate(nodes):
            by_node.setdefault(frozenset(node & allowed), []).append(i)
        if all(len(cpus) >= len(idx) for cpus, idx in by_node.items()):
            sets: list[tuple] = [()] * len(gpus)
            for cpus, idx in by_node.items():
                for i, share in zip(idx, split(sorted(cpus), len(idx)), strict=True):
                    sets[i] = share
            return sets
    return split(sorted(allowed), len(gpus))


# Where a GPU was already chosen for this process (SLURM's --gres sets these to the
# job's GPUs), the slots are those GPUs only: indices or UUIDs, comma-separated.
VISIBLE_ENV = {"nvidia": "CUDA_VISIBLE_DEVICES", "amd": "ROCR_VISIBLE_DEVICES"}


def visible(gpus: list[Gpu], environ=os.environ) -> list[Gpu]:
    """The GPUs this process may use: those its vendor's visible-devices variable names
    (by index or UUID), all where it is unset."""
    kept = []
    for gpu in gpus:
        given = environ.get(VISIBLE_ENV[gpu.vendor])
        names = None if given is None else {n.strip() for n in given.split(",")}
        if names is None or str(gpu.index) in names or gpu.uuid in names:
            kept.append(gpu)
    return kept


def machine_slots(capture: Capture, cpu_slots: int, *, allowed: set[int] | None = None,
                  which=shutil.which, sys_root: Path = SYS) -> Machine:
    """The slots of this machine for a suite that asks for `cpu_slots` CPU slots. More
    GPUs than CPUs leave the surplus GPUs without a slot (each slot needs a CPU)."""
    if allowed is None:
        fake = os.environ.get(FAKE_CPUS_ENV)
        allowed = parse_cpulist(fake) if fake else set(os.sched_getaffinity(0))
    gpus, reason = list_gpus(capture, which=which)
    gpus = visible(gpus)
    notes = []
    if len(gpus) > len(allowed):
        notes.append(f"{len(gpus)} GPUs but {len(allowed)} CPUs: only {len(allowed)} "
                     f"GPU slots")
        gpus = gpus[:len(allowed)]
    gpu_slots = tuple(Slot(i, cpus, gpu) for i, (gpu, cpus) in
                      enumerate(zip(gpus, gpu_cpu_sets(gpus, allowed, sys_root), strict=True)))
    count = min(cpu_slots, len(allowed))
    if count < cpu_slots:
        notes.append(f"cpu_slots {cpu_slots} but {len(allowed)} CPUs: {count} CPU slots")
    cpu = tuple(Slot(i, cpus) for i, cpus in enumerate(split(sorted(allowed), count)))
    return Machine(gpu_slots, cpu, reason if not gpus else None, notes)
