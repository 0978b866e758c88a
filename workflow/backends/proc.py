"""Running external tools: argument lists only (never a shell), a timeout always (but
for a whole workflow run attached, `run_attached`, whose tools have their own), and a
failure turned into a StageError carrying the first lines of the tool's own diagnostics
(not the lines of an input file that it quotes: `diagnostic_lines`). A probe that reads
a tool's answer whatever its exit status uses `capture`, a worker read line by line as
it runs `Streaming`. Output is decoded with errors="replace": a tool's stray bytes are
never benchflow's crash. The only module of benchflow that starts a process."""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from workflow.backends.groups import descendants
from workflow.backends.output import (
    CHUNK,
    CappedOutput,
    log_cap_bytes,
)
from workflow.backends.worker_side import PARENT_ENV
from workflow.errors import (
    OWN_BUG_EXIT,
    OwnBug,
    StageError,
    failure_reason,
)

ERROR_LINES = 12
# How long the output of a killed tool's group is waited for: its pipes close as its
# members die, unless one left the group (setsid) and still holds them.
KILL_GRACE_S = 5
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


def log_tail(log: str | Path | None, n: int) -> str:
    """The last `n` bytes of a log (a worker's stderr), decoded with replacement; reads
    only those bytes, however large the log grew ("" without a log)."""
    if not log:
        return ""
    with open(log, "rb") as fh:
        fh.seek(max(0, fh.seek(0, os.SEEK_END) - n))
        return fh.read().decode("utf-8", errors="replace")


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
        proc = run_group(argv, timeout=timeout, env=env)
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
        raise StageError(stage, failure_text(Path(argv[0]).name, proc.returncode,
                                             proc.stderr or proc.stdout))
    return proc


def failure_text(tool: str, code: int, output: str) -> str:
    """A failed tool's recorded error: `iree-compile exited with 1: error: failed to
    legalize ...` then the first lines of its diagnostics. The reason is on the first
    line because that line is what the terminal, report.md and report.html show; a
    Python worker's exception comes last in its traceback, past the first lines."""
    output = diagnostic_lines(output)
    reason = failure_reason(output, tool)
    return (f"{tool} {exit_reason(code)}:" + (f" {reason}" if reason else "")
            + f"\n{first_lines(output)}")


# The process groups run_group and Streaming started that still run, by leader pid (the
# group's id): an interrupt of a job kills them all (kill_live_groups), the tools that
# threads started too, which no KeyboardInterrupt reaches (an export pool's torch
# processes held an interrupted IREE batch for 45 s). Once it has, no tool starts.
_LIVE: set[int] = set()
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()


def _started(pid: int) -> None:
    with _LIVE_LOCK:
        _LIVE.add(pid)
    if _STOPPING.is_set():  # started while the interrupt killed the others
        _kill(pid)


def _ended(pid: int) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(pid)


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_live_groups() -> None:
    """SIGKILL to every tool group this process started that still runs, and none
    started after: what an interrupted job does first, so that it stops at once rather
    than when its threads' tools end (their sessions get no signal from the terminal)."""
    _STOPPING.set()
    with _LIVE_LOCK:
        pids = list(_LIVE)
    for pid in pids:
        _kill(pid)


def run_group(argv: list[str], *, timeout: float, env: dict | None = None,
              ) -> subprocess.CompletedProcess:
    """Runs argv in a process group of its own (a new session) to its end, its output
    captured and decoded with replacement; past `timeout` the whole group is killed and
    subprocess.TimeoutExpired raised with what it wrote. The group, not the process:
    a profiler or a compiler driver that forks the real tool leaves the tool running
    when only its parent is killed, and the tool, holding the output pipes, would keep
    us waiting for their end (subprocess.run waits for them after its kill). Any other
    way out (Ctrl-C in the job, a bug) kills the group too: a tool in its own session
    gets no signal from the terminal."""
    proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, **(env or {})})
    _started(proc.pid)
    outs = (CappedOutput(log_cap_bytes()), CappedOutput(log_cap_bytes()))
    with proc:
        try:
            if not _read_until(proc, outs, time.monotonic() + timeout):
                _kill_group(proc)
                # A member that left the group may hold a pipe: what came is kept.
                _read_until(proc, outs, time.monotonic() + KILL_GRACE_S)
                raise subprocess.TimeoutExpired(proc.args, timeout, outs[0].text(),
                                                outs[1].text())
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            _ended(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, outs[0].text(),
                                       outs[1].text())


def _read_until(proc: subprocess.Popen, outs: tuple[CappedOutput, CappedOutput],
                deadline: float) -> bool:
    """Reads proc's stdout and stderr into `outs` until both end and proc ends (True) or
    the deadline passes (False)."""
    with selectors.DefaultSelector() as sel:
        for pipe, out in zip((proc.stdout, proc.stderr), outs, strict=True):
            if not pipe.closed:
                sel.register(pipe, selectors.EVENT_READ, out)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, _ in sel.select(left):
                chunk = os.read(key.fileobj.fileno(), CHUNK)
                if chunk:
                    key.data.write(chunk)
                else:
                    sel.unregister(key.fileobj)
                    key.fileobj.close()
    try:  # a tool may close its output and go on
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False
    return True


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to the process group `proc` leads (its id is the group's); the group may
    be gone already (every member ended), which is what was wanted."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()




def run_python(module: str, args: list[str], *, stage: str, timeout: float, log=None):
    """Runs `python -m module args` in a fresh process: a crash or hang in torch or the
    IREE runtime becomes a recorded failure instead of killing the Snakemake job. The
    worker dies with this process (worker_main), even by `kill -9`."""
    return run_tool([sys.executable, "-m", module, *args], stage=stage, timeout=timeout, log=log,
                    env={PARENT_ENV: str(os.getpid())}, own_bug_exit=True)


def run_attached(argv: list[str], *, out: IO[str] | None = None) -> int:
    """Runs argv to its end and returns its exit status, its stdout and stderr going to
    `out` (an open file) or, without one, to this process's own. Without a timeout: it is
    for a workflow that reports as it goes (snakemake), whose every tool has its own."""
    proc = subprocess.Popen([str(a) for a in argv], stdout=out,
                            stderr=None if out is None else subprocess.STDOUT)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        _let_it_stop(proc)
        raise


# How long a run attached is given to stop on the Ctrl-C that reached us, before it is
# passed on. Snakemake takes about half a second to cancel its jobs, remove their partial
# outputs and unlock its directory.
INTERRUPT_GRACE_S = 5


def _let_it_stop(proc: subprocess.Popen) -> None:
    """After Ctrl-C, the run attached stops on its own terms. It shares our process group
    (so that a supervisor's kill of the group ends it too), and the terminal's Ctrl-C
    reached it and its jobs as well: killed then (subprocess.run kills it 0.25 s after
    Ctrl-C), Snakemake would leave its lock, the rerun refused until `--unlock`, and its
    jobs running. A SIGINT meant for us alone (`kill -INT`) is passed on to it and to
    every process below it: Snakemake waits for its jobs before it ends."""
    try:
        proc.wait(timeout=INTERRUPT_GRACE_S)
    except subprocess.TimeoutExpired:
        for pid in [proc.pid, *descendants(proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)
        proc.wait()


def exit_reason(code: int) -> str:
    """A process's end in words: `exited with -11 (killed by SIGSEGV)`, `exited with 1`."""
    if code < 0:
        try:
            return f"exited with {code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"exited with {code}"


class Timeout(Exception):
    """A tool that did not end within its timeout (it was killed)."""


def capture(argv: list[str], *, timeout: float, env: dict | None = None,
            ) -> subprocess.CompletedProcess:
    """Runs argv to its end and returns it whatever its exit status, for a caller that
    reads the answer itself (a probe: does the compiler take this chip, is this device
    here, what does that interpreter import?). Raises Timeout past `timeout`, OSError
    when argv cannot start."""
    try:
        return run_group(argv, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise Timeout(f"{Path(argv[0]).name} did not end within {timeout:g} s") from None


def python_env(python: str) -> dict:
    """What running benchflow's modules in the interpreter `python` adds to our
    environment: nothing for ours; for another (a SKU's torch.python), which has no
    benchflow package of its own, this checkout on its PYTHONPATH."""
    if python == sys.executable:
        return {}
    from workflow.paths import REPO_ROOT

    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), path]))}


class Streaming:
    """A tool whose stdout is read line by line as it runs (a torch worker reports each
    case as it starts and ends), in a session of its own, so that kill() ends its
    children too; its stderr is appended to `log` (or dropped). The caller keeps the
    time: readline() waits at most `timeout` seconds. With `commands`, the caller also
    writes it lines (`send`: a long-lived A/B worker asked for one timed block at a time).
    Use it in a `with` block, which kills what still runs at its end.

    Its stderr reaches the log through a thread that keeps it within the cap
    (CappedOutput: a model that prints without end), never blocking the worker: past
    the cap the bytes are read and dropped, and the log says so (`log_cut`: how many)."""

    def __init__(self, argv: list[str], *, log: str | None = None, env: dict | None = None,
                 commands: bool = False):
        # Binary: the worker's stderr goes to the file as the bytes it wrote.
        self._file = open(log, "ab") if log else None  # noqa: SIM115 - closed by __exit__
        self._log = CappedOutput(log_cap_bytes(), self._file) if log else None
        self._copier: threading.Thread | None = None
        try:
            self.proc = subprocess.Popen(
                [str(a) for a in argv], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if log else subprocess.DEVNULL, text=True,
                errors="replace", start_new_session=True, env={**os.environ, **(env or {})},
                stdin=subprocess.PIPE if commands else None)
        except BaseException:
            self._close_log()
            raise
        _started(self.proc.pid)
        if self._log is not None:
            self._copier = threading.Thread(target=self._copy_log, daemon=True)
            self._copier.start()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)
        self._buf = b""

    def send(self, line: str) -> bool:
        """Writes one line to its stdin; False when it no longer reads (it ended)."""
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):  # ValueError: stdin already closed
            return False
        return True

    def readline(self, timeout: float) -> str | None:
        """The next line of its stdout; "" at its end; None when none came in `timeout` s.

        Read from the pipe's descriptor into a buffer of our own: a buffered readline
        takes every line the pipe holds and returns the first, and the next select() then
        waits on an empty pipe while a line it already read waits in the buffer (a
        worker's "start" of its next case went unseen, and its hang was blamed on the case
        before)."""
        while b"\n" not in self._buf:
            if not self._sel.select(timeout=timeout):
                return None
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:  # its end: what is left, then ""
                rest, self._buf = self._buf, b""
                return rest.decode("utf-8", errors="replace")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return (line + b"\n").decode("utf-8", errors="replace")

    def wait(self) -> int:
        code = self.proc.wait()
        self._close_log()  # whole before a caller reads its tail
        return code

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._close_log()

    @property
    def log_cut(self) -> int:
        """How many bytes of its stderr the log left out (the cap)."""
        return self._log.cut if self._log is not None else 0

    def _copy_log(self) -> None:
        fd = self.proc.stderr.fileno()
        try:
            while chunk := os.read(fd, CHUNK):
                self._log.write(chunk)
        except (OSError, ValueError):  # the log closed under a member that left the group
            pass

    def _close_log(self) -> None:
        """Waits (KILL_GRACE_S at most, for a member that left the group holding the
        pipe) for the rest of its stderr, then ends the log with what the cap left."""
        if self._file is None or self._file.closed:
            return
        if self._copier is not None:
            self._copier.join(KILL_GRACE_S)
        self._file.write(self._log.ending())
        self._file.close()

    def __enter__(self) -> Streaming:
        return self

    def __exit__(self, *exc) -> None:
        self._sel.close()
        if self.proc.poll() is None:
            self.kill()  # first: the log's end waits for the worker's stderr to close
        self._close_log()
        _ended(self.proc.pid)


def _log(log, argv, stdout, stderr, status: str) -> None:
    if not log:
        return

    def text(x):
        return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")

    from workflow.records.storage import WriteError

    try:
        with open(log, "a", encoding="utf-8", errors="replace") as fh:
            fh.write("$ " + " ".join(map(str, argv)) + "\n")
            fh.write(text(stdout)[-20000:])
            fh.write(text(stderr)[-20000:])
            fh.write(f"[{status}]\n")
    except OSError as exc:  # a full disk: the log named, not a bare errno
        raise WriteError(log, exc) from None
