"""A CPU hog for the evidence and the hog test: busy-loop processes that this module
starts and always stops, so that "another process loads the machine" is a condition a
script or test sets up on purpose instead of waiting for it (issue 22)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

# A busy loop with no output: it only takes a core, until its parent is gone (a
# parent killed by a signal runs no `finally`; the loop must not outlive it).
BUSY = ("import os\n"
        "parent = os.getppid()\n"
        "while os.getppid() == parent:\n"
        "    for _ in range(100_000):\n"
        "        pass\n")


@contextmanager
def cpu_hog(processes: int = 2) -> Iterator[list[int]]:
    """Runs `processes` busy-loop Python processes for the duration of the block and
    yields their pids; they are killed and waited for when the block ends, however it
    ends (an exception, a KeyboardInterrupt)."""
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(processes):
            procs.append(subprocess.Popen([sys.executable, "-c", BUSY],
                                          stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        time.sleep(0.2)  # past the interpreter's start-up: the loops are spinning
        dead = [p.pid for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"CPU hog processes {dead} exited at once")
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait()


def hogged_share(pids: list[int]) -> float:
    """CPU seconds the hog processes have used so far per second of their life, summed
    (about 2 for two hogs on an otherwise idle 2-core machine): evidence that the hog
    really ran."""
    tick = os.sysconf("SC_CLK_TCK")
    uptime = float(open("/proc/uptime").read().split()[0])
    total = 0.0
    for pid in pids:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / tick       # utime + stime
        alive = uptime - int(fields[19]) / tick                 # now - starttime
        total += cpu / max(alive, 1e-9)
    return total
