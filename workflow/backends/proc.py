"""Running external tools: argument lists only (never a shell), a timeout always,
and a failure turned into a StageError carrying the first lines of the tool's own
diagnostics (not the lines of an input file that it quotes: `diagnostic_lines`)."""

from __future__ import annotations

import faulthandler
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from workflow.errors import OWN_BUG_EXIT, OwnBug, StageError, raised_in_own_code

ERROR_LINES = 12
# The marker line under a quoted source line (MLIR, LLVM, clang): `   ^`, `^~~~`.
CARET_RE = re.compile(r"^\s*\^[\s^~]*$")


def first_lines(text: str, n: int = ERROR_LINES) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    out = "\n".join(lines[:n])
    return out + ("\n..." if len(lines) > n else "")


def diagnostic_lines(text: str) -> str:
    """A tool's output without the input-file lines it quotes: iree-compile (MLIR's
    diagnostics, as LLVM's) prints the offending line of its input under each
    `file:line:col: error: ...` with a caret line below it. The quoted line and its caret
    are dropped, so that a recorded error carries what the tool says, never a line of a
    file's contents (the full output stays in the stage's log)."""
    lines = text.splitlines()
    return "\n".join(
        ln for i, ln in enumerate(lines)
        if not CARET_RE.match(ln)
        and not (i + 1 < len(lines) and CARET_RE.match(lines[i + 1]) and ln.strip()))


def tool_path(name: str) -> str:
    """A console tool of the active environment (next to its python) or on PATH."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if not found:
        raise StageError("setup", f"{name} not found next to {sys.executable} or on PATH")
    return found


def run_tool(
    argv: list[str],
    *,
    stage: str,
    timeout: float,
    log: str | Path | None = None,
    env: dict | None = None,
    own_bug_exit: bool = False,
) -> subprocess.CompletedProcess:
    """Runs argv; returns the completed process or raises StageError (non-zero exit or timeout)."""
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
            env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired as exc:
        _log(log, argv, exc.stdout, exc.stderr, f"timeout after {timeout:g} s")
        raise StageError(stage, f"timeout after {timeout:g} s: {Path(argv[0]).name}") from None
    except OSError as exc:
        raise StageError(stage, f"could not start {argv[0]}: {exc}") from None
    _log(log, argv, proc.stdout, proc.stderr,
         f"exit {proc.returncode} after {time.monotonic() - start:.2f} s")
    if proc.returncode == OWN_BUG_EXIT and own_bug_exit:
        raise OwnBug(f"{Path(argv[0]).name} {' '.join(map(str, argv[1:3]))}: benchflow's own "
                     f"code failed in the worker:\n{proc.stderr[-4000:]}")
    if proc.returncode != 0:
        detail = first_lines(diagnostic_lines(proc.stderr or proc.stdout))
        raise StageError(stage, f"{Path(argv[0]).name} {exit_reason(proc.returncode)}:\n{detail}")
    return proc


def run_python(module: str, args: list[str], *, stage: str, timeout: float, log=None):
    """Runs `python -m module args` in a fresh process: a crash or hang in torch or the
    IREE runtime becomes a recorded failure instead of killing the Snakemake job."""
    return run_tool([sys.executable, "-m", module, *args], stage=stage, timeout=timeout, log=log,
                    own_bug_exit=True)


def exit_reason(code: int) -> str:
    """A process's end in words: `exited with -11 (killed by SIGSEGV)`, `exited with 1`."""
    if code < 0:
        try:
            return f"exited with {code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"exited with {code}"


def worker_main(main: Callable[[list[str]], None]) -> None:
    """Runs a worker process's main: a tool's exception exits 1 (run_python records it
    as the stage's failure), benchflow's own bug exits OWN_BUG_EXIT (run_python raises
    OwnBug and the Snakemake job fails)."""
    # A crash in torch or IREE's native code leaves its Python stack in the log.
    faulthandler.enable()
    try:
        main(sys.argv[1:])
    except Exception as exc:
        # The exception first: the recorded error keeps the first lines, and a deep
        # model call must not push the line that says what went wrong out of them.
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        traceback.print_exc()
        sys.exit(OWN_BUG_EXIT if raised_in_own_code(exc) else 1)


def _log(log, argv, stdout, stderr, status: str) -> None:
    if not log:
        return

    def text(x):
        return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")

    with open(log, "a") as fh:
        fh.write("$ " + " ".join(map(str, argv)) + "\n")
        fh.write(text(stdout)[-20000:])
        fh.write(text(stderr)[-20000:])
        fh.write(f"[{status}]\n")
