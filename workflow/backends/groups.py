"""The processes below this one and their process groups (Linux's /proc), for ending
what this process started when it leaves: backends/proc.py's tools run in sessions of
their own, which the terminal's Ctrl-C does not reach."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """The processes below `pid`, children first (Linux's /proc/PID/task/TID/children;
    none where there is no such file)."""
    found, todo = [], [pid]
    while todo:
        for listing in Path(f"/proc/{todo.pop()}/task").glob("*/children"):
            try:
                children = [int(c) for c in listing.read_text().split()]
            except (OSError, ValueError):  # the task ended meanwhile
                continue
            found += children
            todo += children
    return found


def kill_own_groups() -> None:
    """SIGKILL to each process group that a process below this one leads: the tools
    proc.run_group started in sessions of their own, from any thread. For a process
    that is leaving (Ctrl-C) while threads of its own still wait for such tools: a tool
    in its own session gets no signal from the terminal, and the threads would keep the
    process waiting for the tools' ends."""
    for pid in descendants(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
