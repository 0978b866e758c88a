"""What disturbed one invocation: the CPU time other processes took while it ran.

Two torch threads on two cores stall at barriers whenever another process takes a
core; IREE's single-threaded local-sync loses its core's caches. Such an invocation's
time is the load's, not the code's, and no number of invocations averages it away: the
medians become bimodal (issue 22: torch-eager 15.9 ms under load against 0.07 ms idle,
reported `ok`). So every invocation is observed, not only timed:

- `outside_share`: CPU time that neither the timed process nor benchflow itself used,
  on the CPUs this process may run on, as a share of what those CPUs could give over
  the invocation's wall time: (busy time from /proc/stat - own CPU time + steal) /
  (wall x CPUs). Steal (a hypervisor running other guests) counts: the vCPU wanted to
  run and could not.
- `cpu_per_wall`: the timed process's CPU time over its wall time (1 for one busy
  thread; below its thread count when it waited for a core).
- `nivcsw`: its involuntary context switches (the kernel took its core away).
- `load1`: the machine's one-minute load average at the end.

An invocation is `disturbed` when outside_share exceeds the SKU's
`measurement.disturbed_share`. The figures come from the kernel's accounting (clock
ticks, 10 ms), which is coarse for invocations shorter than a few tenths of a second:
then the share is an estimate, and the threshold is set well above its error.
"""

from __future__ import annotations

import os
import resource
import time

METHOD = ("outside CPU share: (/proc/stat busy + steal on this process's CPUs - own CPU "
          "time) / (wall x CPUs)")
_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpus() -> set[int]:
    try:
        return os.sched_getaffinity(0)
    except AttributeError:  # not Linux
        return set(range(os.cpu_count() or 1))


def _stat(cpus: set[int]) -> tuple[float, float] | None:
    """(busy seconds without steal, steal seconds) summed over `cpus` since boot; None
    where /proc/stat cannot be read (not Linux)."""
    try:
        with open("/proc/stat", encoding="ascii", errors="replace") as fh:
            lines = fh.readlines()
    except OSError:
        return None
    busy = steal = 0
    for line in lines:
        name, *values = line.split()
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        v = dict(zip(_FIELDS, map(int, values[:len(_FIELDS)]), strict=False))
        busy += sum(v.get(k, 0) for k in ("user", "nice", "system", "irq", "softirq"))
        steal += v.get("steal", 0)
    return busy / _TICK, steal / _TICK


def _own() -> tuple[float, float, int, int]:
    """(CPU seconds of waited-for children, CPU seconds of this process, involuntary
    context switches of the children, of this process)."""
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    me = resource.getrusage(resource.RUSAGE_SELF)
    return ch.ru_utime + ch.ru_stime, me.ru_utime + me.ru_stime, ch.ru_nivcsw, me.ru_nivcsw


class Probe:
    """Observes one invocation: `with Probe(threshold) as p: <run it>`, then
    `p.result()`. `timed`: "children" when the timed process is a child this process
    waits for within the block (a fresh iree-benchmark-module), "self" when the timed
    code runs in this very process (a torch worker's timed block)."""

    def __init__(self, threshold: float, timed: str = "children"):
        if timed not in ("children", "self"):
            raise ValueError(f"timed must be 'children' or 'self', got {timed!r}")
        self.threshold, self.timed = threshold, timed
        self.cpus = _cpus()

    def __enter__(self) -> Probe:
        self._stat, self._own = _stat(self.cpus), _own()
        self._t0 = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self._wall = time.monotonic() - self._t0
        self._stat_end, self._own_end = _stat(self.cpus), _own()

    def result(self) -> dict:
        """The invocation's disturbance (module doc)."""
        wall = max(self._wall, 1e-9)
        d = [end - start for start, end in zip(self._own, self._own_end, strict=True)]
        # What benchflow's own process spent around a child counts as ours, not outside.
        timed, nivcsw = (d[0], d[2]) if self.timed == "children" else (d[1], d[3])
        harness = d[1] if self.timed == "children" else 0.0
        out = {"wall_s": wall, "cpu_s": timed, "cpu_per_wall": timed / wall,
               "nivcsw": nivcsw, "load1": os.getloadavg()[0],
               "outside_share": None, "steal_share": None, "disturbed": False,
               "reason": None}
        if self._stat is None or self._stat_end is None:
            return out
        capacity = wall * len(self.cpus)
        busy = self._stat_end[0] - self._stat[0]
        steal = self._stat_end[1] - self._stat[1]
        outside = max(0.0, busy - timed - harness) + steal
        out["outside_share"] = min(1.0, outside / capacity)
        out["steal_share"] = min(1.0, steal / capacity)
        if out["outside_share"] > self.threshold:
            out["disturbed"] = True
            out["reason"] = (f"other processes used {out['outside_share']:.0%} of the CPUs "
                             f"(threshold {self.threshold:.0%})")
        return out


def granted_cpus() -> int:
    """How many CPUs this process is granted: its CPU affinity and its cgroup's CPU quota
    (v1 or v2, rounded up), whichever is fewer (loky.cpu_count, which reads both). A
    property of how the process was started, never of what else runs at the moment:
    a thread count taken from other processes' load changed between reruns of
    unchanged code, and with it the level measured (DESIGN.md, "Measurement protocol")."""
    from joblib.externals.loky import cpu_count

    return max(1, cpu_count(only_physical_cores=False))


def outside_share(sample_s: float = 0.5) -> float | None:
    """The share of this process's CPUs other processes used over `sample_s` (None where
    /proc/stat cannot be read): recorded as the load a measurement started under."""
    with Probe(1.0) as probe:
        time.sleep(sample_s)
    return probe.result()["outside_share"]
