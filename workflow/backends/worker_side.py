"""The worker's side of backends/proc.py's run_python and Streaming: what runs inside a
worker process (its main, its stdio, its protocol channel, dying with its parent) and
the marker that tells benchflow's own bug from a model's exit. proc.py starts workers
and reads them; this module never starts a process."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from workflow.backends.output import MACHINE_ERRNOS
from workflow.errors import OWN_BUG_EXIT, raised_in_own_code

# Set by run_python for its worker (worker_main): the pid of the process that waits for
# it, which the worker must not outlive.
PARENT_ENV = "BENCHFLOW_WORKER_PARENT"
# Linux's prctl option: the signal a process gets when its parent dies.
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """A worker of run_python is killed when the process that started it dies: in a
    session of its own, it gets no signal of its parent's group, and after `kill -9` of
    `benchflow bisect` its prepare process ran on for seconds, parentless (Linux's
    PR_SET_PDEATHSIG; the thread that started it waits for it, so the thread ends only
    after it does). Elsewhere nothing changes."""
    parent = os.environ.pop(PARENT_ENV, None)
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if str(os.getppid()) != parent:  # it died before the signal was asked for
        os._exit(1)


def tolerant_stdio() -> None:
    """A worker's sys.stdout and sys.stderr write any str: a model that prints a string
    holding a lone surrogate (a file name or a locale message decoded with
    surrogateescape) would otherwise raise UnicodeEncodeError in its own print and fail
    its case for a log line. Line-buffered, so that its lines and ours keep their order
    in the log."""
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(errors="backslashreplace", line_buffering=True)


def protocol_channel() -> TextIO:
    """The stream a worker whose stdout is its protocol (the torch worker's JSON lines,
    read line by line by its parent) writes its messages to; everything else written
    to "stdout" goes to stderr (the log) from here on.

    Moved at the file-descriptor level, not only sys.stdout: model code prints through
    sys.stdout, sys.__stdout__ or print(), but a C extension (a kernel library's banner,
    a compiler's diagnostics) writes to fd 1 itself, and a subprocess it starts (a
    torch.compile compile worker) inherits fd 1. So the pipe is kept on a private
    duplicate of fd 1 and fd 1 is pointed at stderr: nothing but our messages can reach
    the parent's pipe, whatever writes, in whatever encoding. The duplicate is not
    inheritable (os.dup's default), so a child that outlives the worker does not hold
    the pipe open either."""
    sys.stdout.flush()
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    tolerant_stdio()
    return channel


def worker_main(main: Callable[[list[str]], None]) -> None:
    """Runs a worker process's main: a tool's exception exits 1 (run_python records it
    as the stage's failure), benchflow's own bug exits OWN_BUG_EXIT (run_python raises
    OwnBug and the Snakemake job fails). A file the worker could not write (a full or
    read-only file system: WriteError) is the machine's failure, not a bug: exit 1, its
    one line `could not write PATH: REASON` and nothing else: a traceback would only say
    where the disk ran out, which is nobody's bug (MACHINE_ERRNOS)."""
    from workflow.records.storage import WriteError

    _die_with_parent()
    # A crash in torch or IREE's native code leaves its Python stack in the log.
    faulthandler.enable()
    tolerant_stdio()
    try:
        main(sys.argv[1:])
    except Exception as exc:
        # The exception first: the recorded error keeps the first lines, and a deep
        # model call must not push the line that says what went wrong out of them.
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        machine = isinstance(exc, WriteError) or (isinstance(exc, OSError)
                                                  and exc.errno in MACHINE_ERRNOS)
        if not machine:
            traceback.print_exc()
        own = raised_in_own_code(exc) and not machine
        sys.exit(OWN_BUG_EXIT if own else 1)


# Beside a worker's file (its result, its plan): written by the worker when benchflow's
# own code failed in it, just before it exits OWN_BUG_EXIT. A user's model runs in the
# worker and may end it with any status, OWN_BUG_EXIT included (os._exit(70) or
# sys.exit(70) in its forward): only this file, which a model's exit never writes, makes
# the parent take the exit for our bug (OwnBug) rather than the case's failure.
OWN_BUG_SUFFIX = ".own-bug"


def own_bug_marker(path: str | Path) -> Path:
    """The own-bug marker of the worker whose file is `path`."""
    return Path(f"{path}{OWN_BUG_SUFFIX}")


@contextlib.contextmanager
def marking_own_bug(path: str | Path) -> Iterator[None]:
    """Around a worker's body: an exit with OWN_BUG_EXIT raised by benchflow's own code
    (worker_main's, a worker's own) writes `path`'s own-bug marker on its way out. A
    model's sys.exit(OWN_BUG_EXIT) is raised in the model's frame and writes none, and
    an os._exit passes no Python code at all."""
    try:
        yield
    except SystemExit as exc:
        if exc.code == OWN_BUG_EXIT and raised_in_own_code(exc):
            own_bug_marker(path).touch()
        raise


def ended_by_own_bug(code: int, path: str | Path) -> bool:
    """Whether a worker that ended with `code` ended for benchflow's own bug: its exit
    status and its marker beside `path` (marking_own_bug), never the status alone."""
    return code == OWN_BUG_EXIT and own_bug_marker(path).exists()
