"""What every Snakemake job script (scripts/*.py) does first: Ctrl-C ends it quietly.

The terminal's Ctrl-C reaches every process of its foreground group: the benchflow
command, snakemake and each job snakemake runs. Snakemake stops the run itself (it names
the jobs it stopped and removes their partial outputs, so the rerun makes them again);
a job's KeyboardInterrupt traceback, 30 lines of it per job, would only read as a crash
of benchflow's own. So a job ends by SystemExit instead, which unwinds as the interrupt
would (the tools it started are killed on the way out, backends/proc.run_group) and
prints nothing."""

from __future__ import annotations

import signal
import types

# 128 + SIGINT: what a shell reports for a job it interrupted.
INTERRUPTED = 130


def end_quietly_on_ctrl_c() -> None:
    signal.signal(signal.SIGINT, _end)


def _end(signum: int, frame: types.FrameType | None) -> None:
    raise SystemExit(INTERRUPTED)
