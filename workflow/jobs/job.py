"""What every Snakemake job script (scripts/*.py) does first: Ctrl-C ends it quietly.

The terminal's Ctrl-C reaches every process of its foreground group: the benchflow
command, snakemake and each job snakemake runs. Snakemake stops the run itself (it names
the jobs it stopped and removes their partial outputs, so the rerun makes them again);
a job's KeyboardInterrupt traceback, 30 lines of it per job, would only read as a crash
of benchflow's own. So a job ends by SystemExit instead, which unwinds as the interrupt
would (the tools it started are killed on the way out, backends/proc.run_group) and
prints nothing. SIGTERM (a CI job cancelled: the runner signals the whole group) the
same: the default action would end the job at once, its tools left running in their
own sessions.

A write the machine refuses (a full disk or quota, a read-only file system: proc.
MACHINE_ERRNOS) ends the job with one line naming the file, `benchflow: could not write
PATH: No space left on device`: the traceback under it would say only where the disk ran
out, which is nobody's bug, and read as a crash of benchflow's own (Snakemake prints the
job's stderr). The gate's failure (a regression, a case it could not judge, bad input) is
its answer, printed as its lines without a traceback. Any other exception keeps its
traceback."""

from __future__ import annotations

import signal
import sys
import types

from workflow.backends.output import MACHINE_ERRNOS
from workflow.backends.proc import kill_live_groups

# 128 + SIGINT: what a shell reports for a job it interrupted.
INTERRUPTED = 130


def end_quietly_on_ctrl_c() -> None:
    """What every job script calls first: Ctrl-C, SIGTERM and a refused write end it
    quietly."""
    signal.signal(signal.SIGINT, _end)
    signal.signal(signal.SIGTERM, _end)
    sys.excepthook = _machine_fault_in_one_line


def machine_fault_line(exc: BaseException) -> str | None:
    """The one line a write the machine refused ends a job with (None: another error).
    A WriteError names its file; a bare OSError names it where the OS gave one."""
    from workflow.records.storage import WriteError

    if not isinstance(exc, OSError) or exc.errno not in MACHINE_ERRNOS:
        return None
    if isinstance(exc, WriteError):
        return f"benchflow: {exc}"
    where = f" {exc.filename}" if exc.filename else " a file (the OS did not say which)"
    return f"benchflow: could not write{where}: {exc.strerror}"


def refusal_lines(exc: BaseException) -> str | None:
    """What a job that refuses by design ends with, instead of a traceback (None: any other
    error): a write the machine refused (machine_fault_line), or the gate's verdict
    (regression.gate.GateFailed: the cases that regressed or could not be judged, or
    the bad input, under a heading each), which is the gate's answer, not a crash."""
    from workflow.regression.gate import GateFailed

    if isinstance(exc, GateFailed):
        return f"benchflow: the gate failed: {exc}"
    return machine_fault_line(exc)


def _machine_fault_in_one_line(kind, exc, tb) -> None:
    line = refusal_lines(exc)
    if line is None:
        sys.__excepthook__(kind, exc, tb)
    else:
        print(line, file=sys.stderr)  # Python still exits 1, as for any uncaught error


def _end(signum: int, frame: types.FrameType | None) -> None:
    # The tools first, those of the job's threads too (an export pool's): the job ends
    # now, not when they do.
    kill_live_groups()
    raise SystemExit(128 + signum)  # INTERRUPTED for SIGINT
