"""Where a case's wall time goes: seconds per phase, the record's `cost` section
(DESIGN.md, "The case record"), for torch and IREE cases alike."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable


class Cost:
    """Seconds per phase of one case: each phase is timed where it runs (a phase run
    twice adds up), and `on_phase(name, seconds)` hears of each (the torch worker's
    "tick" lines, which keep its parent's per-step deadline); `on_begin(name)` hears of
    each as it begins (the worker's "phase" lines: its parent names what a stopped case
    was doing, and holds torch.compile to its budget)."""

    def __init__(self, on_phase: Callable[[str, float], None] | None = None,
                 on_begin: Callable[[str], None] | None = None):
        self.seconds: dict[str, float] = {}
        self._on_phase = on_phase
        self._on_begin = on_begin

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    @contextlib.contextmanager
    def phase(self, name: str):
        if self._on_begin:
            self._on_begin(name)
        t0 = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - t0
            self.add(name, spent)
            if self._on_phase:
                self._on_phase(name, spent)
