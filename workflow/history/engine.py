"""chdb at the embedded store's boundary: its session started and its statements run,
and what fails there told in one line naming the store. A full disk (chdb's
NOT_ENOUGH_SPACE, the OS's ENOSPC, or chdb failing in other words while the disk is
nearly full) is `no_space`; a store chdb cannot start on is damaged (history/layout.py's
words, with the way out); any other failed statement is raised as chdb's, a bug of
benchflow's SQL."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from workflow.errors import ConfigError
from workflow.history import layout

# Less free than this and a failed statement is the disk's doing: chdb reserves 1 MiB
# before it writes a part ("Cannot reserve 1.00 MiB, not enough space").
NEARLY_FULL = 1 << 20


def no_space(path: Path, exc: BaseException) -> ConfigError:
    return ConfigError([f"{path}: history store: not enough space on its file system "
                        f"({reason(exc)}); the store was left as it was, nothing of this "
                        "command kept. Expected free space there: free some and run it "
                        "again"])


def reason(exc: BaseException | str) -> str:
    """chdb's or the OS's reason, short and on one line."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc)
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        text = str(exc.args[0][0][-1])  # copytree's (source, destination, why) list
    errno_text = re.match(r"\[Errno \d+\] ([^:]+)", text)
    if errno_text:
        return errno_text.group(1)
    if "DB::Exception:" in text:
        text = text.rsplit("DB::Exception:", 1)[1]
    text = re.sub(r"\s*\([A-Z_]+\)\s*$", "", " ".join(text.split())).rstrip(". ")
    return text[:160] + ("..." if len(text) > 160 else "")


def _import_chdb_session():
    """chdb's session module, a heavy import (a second or more; only embedded stores need
    it), with Ctrl-C held until it is done: a Ctrl-C while chdb's engine loads was seen to
    end as `ImportError: chdb-core engine not found` (chdb's __init__ answers an
    ImportError while it loads the engine so), a traceback claiming a broken install. A
    Ctrl-C meanwhile is delivered again right after, to whatever handles it here
    (Python's KeyboardInterrupt, a job's quiet end)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        from chdb import session as chdb_session  # signal handlers are the main thread's
        return chdb_session
    held: list[int] = []
    before = signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        from chdb import session as chdb_session
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL if before is None else before)
    if held:
        signal.raise_signal(signal.SIGINT)
    return chdb_session


def session(path: Path, where: Path, fresh: bool):
    """chdb's session on `where`. chdb says why it cannot start (a table definition it
    cannot parse, a full disk) on stderr, and raises only "Error initializing
    EmbeddedServer": its stderr is read here, so that the reason is the one line said."""
    chdb_session = _import_chdb_session()
    with tempfile.TemporaryFile() as said:
        saved = os.dup(2)
        os.dup2(said.fileno(), 2)
        try:
            return chdb_session.Session(str(where))
        except RuntimeError as exc:
            os.dup2(saved, 2)
            said.seek(0)
            text = said.read(16_384).decode("utf-8", errors="replace")
            lines = [line for line in text.splitlines() if "DB::Exception" in line]
            why = reason(lines[-1] if lines else exc)
            if layout.out_of_space(exc) or layout.out_of_space(text):
                raise no_space(path, RuntimeError(why)) from None
            if fresh:
                raise
            raise layout.damaged(path, f"chdb cannot open it ({why})") from None
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def run(session, statement: str, path: Path) -> bytes:
    """One statement; a full disk is said in one line (no_space), any other failure
    raised as chdb's: a statement of benchflow's that fails is a bug."""
    try:
        return result(session.query(statement), path)
    except Exception as exc:
        # On a full disk chdb also fails in other words: a definition it rewrote cut
        # short is then an "Empty query" (SYNTAX_ERROR) of its own metadata file.
        if layout.out_of_space(exc) or _free_bytes(path) < NEARLY_FULL:
            raise no_space(path, exc) from None
        raise


def _free_bytes(path: Path) -> int:
    try:
        st = os.statvfs(path)
    except OSError:
        return NEARLY_FULL  # unknown: the failure is said as chdb's
    return st.f_bavail * st.f_frsize


def result(answer, path: Path) -> bytes:
    # chdb raises on a failed statement; a result carrying an error is checked too, so
    # that a failure is never read as an empty answer.
    if answer is None:
        return b""
    if getattr(answer, "has_error", None) and answer.has_error():
        raise RuntimeError(f"{path}: chdb: {answer.error_message()}")
    return answer.bytes()
