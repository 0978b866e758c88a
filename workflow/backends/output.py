"""A tool's or worker's output: kept within a cap (backends/proc.py reads every tool's
output through it), and read for a write the machine refused."""

from __future__ import annotations

import errno
import os
from typing import IO

from workflow.errors import ConfigError

# The most of one output stream (a tool's captured stdout or stderr, a worker's log) that
# is kept: a model that prints without end (a print in a forward timed thousands of
# times) filled a 201 MB log, and a tool's captured output is held in memory. The first
# LOG_CAP_BYTES are kept ($BENCHFLOW_LOG_CAP_MIB), then a line saying how much was left
# out, then the last LOG_TAIL_BYTES: where a traceback is, which the recorded error reads.
LOG_CAP_BYTES = 16 << 20
LOG_TAIL_BYTES = 64 << 10
CHUNK = 1 << 16


def log_cap_bytes() -> int:
    """The cap: $BENCHFLOW_LOG_CAP_MIB (MiB, a fraction too) else LOG_CAP_BYTES."""
    text = os.environ.get("BENCHFLOW_LOG_CAP_MIB", "")
    try:
        value = float(text) if text else LOG_CAP_BYTES / (1 << 20)
    except ValueError:
        value = 0.0
    if not value * (1 << 20) >= 1:
        raise ConfigError([f"BENCHFLOW_LOG_CAP_MIB={text!r}: expected a number of MiB "
                           "above 0 (the most of a tool's output a log keeps)"])
    return int(value * (1 << 20))


class CappedOutput:
    """One output stream, kept within the cap: its head (written through to `sink`, a
    file, as it comes; else held), then only its last LOG_TAIL_BYTES, and `cut`: how
    many bytes between them were left out."""

    def __init__(self, cap: int, sink: IO[bytes] | None = None):
        self.cap, self.sink = cap, sink
        self.kept, self.cut = 0, 0
        self.head, self.tail = bytearray(), bytearray()

    def write(self, chunk: bytes) -> None:
        first, rest = chunk[:max(0, self.cap - self.kept)], chunk[max(0, self.cap - self.kept):]
        if first:
            self.kept += len(first)
            if self.sink is not None:
                self.sink.write(first)
                self.sink.flush()  # a live log shows the worker's lines as they come
            else:
                self.head += first
        if rest:
            self.tail += rest
            over = len(self.tail) - LOG_TAIL_BYTES
            if over > 0:
                del self.tail[:over]
                self.cut += over

    def ending(self) -> bytes:
        """What follows the head: the line that says it was cut, and the tail."""
        note = (f"\n[log cut at {self.cap / (1 << 20):g} MiB: {self.cut} bytes left out; "
                f"the last {len(self.tail)} follow]\n".encode() if self.cut else b"")
        return note + bytes(self.tail)

    def text(self) -> str:
        raw = (bytes(self.head) + self.ending()).decode("utf-8", errors="replace")
        return raw.replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads it


# A worker's write refused by the machine (a full disk or quota, a read-only file system,
# RLIMIT_FSIZE): the case fails with that one line; no traceback, as no code is at fault.
MACHINE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})
_MACHINE_REASONS = tuple(os.strerror(e) for e in sorted(MACHINE_ERRNOS))


def machine_fault(text: str) -> str | None:
    """The line of a failed tool's or worker's output that says the machine refused a
    write (`could not write PATH: No space left on device`), or None: a fault of the
    machine, not of what was measured, which measuring again would not change."""
    for line in text.splitlines():
        if any(reason in line for reason in _MACHINE_REASONS):
            return line.strip().removeprefix("WriteError: ")
    return None
