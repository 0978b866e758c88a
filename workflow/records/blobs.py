"""A content-addressed store of files: each kept under its SHA-256
(`<store>/<first two hex digits>/<digest>`), written to a temporary name and renamed into
place, and verified against its name whenever it is read back. The goldens' artifact
store (baselines/artifacts.py) and the export cache (jobs/export_cache.py) are such
stores.

A stored file is opened without following a symbolic link (O_NOFOLLOW) and only when it
is a regular file (checked on the open descriptor), and its bytes are hashed through
that same descriptor: a link, a directory, a FIFO or a file swapped in its place is
refused, never read through.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO

from workflow.files import kind

BLOCK = 1 << 20  # modules and MLIR can be gigabytes: read in blocks


class Refused(Exception):
    """A stored file that cannot be used: `missing` when there is none, `absent` when no
    regular file is there (none, a link, a directory, ...), else its bytes are not the
    ones its name or entry says."""

    def __init__(self, message: str, *, absent: bool = False, missing: bool = False):
        super().__init__(message)
        self.absent, self.missing = absent or missing, missing


def path_of(store: str | Path, digest: str) -> Path:
    return Path(store) / digest[:2] / digest


def open_regular(path: str | Path) -> BinaryIO:
    """`path` opened for reading when it is a regular file, not through a symbolic link
    (Refused, absent, otherwise; an unreadable one raises its OSError). O_NONBLOCK: a
    FIFO put there returns at once instead of waiting for a writer."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise Refused(f"{path}: does not exist", missing=True) from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a link (or a socket): not followed
            raise Refused(f"{path}: is a symbolic link or a socket, not a regular file",
                          absent=True) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise Refused(f"{path}: is {kind(mode)}, not a regular file", absent=True)
    return os.fdopen(fd, "rb")


def copy_hashed(src: BinaryIO, dest: BinaryIO | None = None) -> tuple[str, int]:
    """(sha256, size) of what is read from `src`, written on to `dest` if given."""
    h, size = hashlib.sha256(), 0
    for block in iter(lambda: src.read(BLOCK), b""):
        h.update(block)
        size += len(block)
        if dest is not None:
            dest.write(block)
    return h.hexdigest(), size


def read_verified(path: str | Path, digest: str, size: int | None = None,
                  dest: BinaryIO | None = None) -> None:
    """Reads the regular file `path` (written on to `dest` if given) and raises Refused
    unless its bytes hash to `digest` and, when given, number `size`."""
    with open_regular(path) as fh:
        got, n = copy_hashed(fh, dest)
    if size is not None and n != size:
        raise Refused(f"{path}: damaged ({n} bytes, expected {size})")
    if got != digest:
        raise Refused(f"{path}: damaged (its bytes hash to {got[:12]}, expected "
                      f"{digest[:12]})")


def get(store: str | Path, digest: str) -> Path:
    """The stored file of `digest`, verified (Refused when it is absent, no regular file,
    or its bytes no longer hash to its name)."""
    path = path_of(store, digest)
    read_verified(path, digest)
    return path


def put(store: str | Path, src: str | Path, digest: str) -> int:
    """Stores `src` under `digest` (its SHA-256), written to a temporary name and renamed,
    so a reader never sees half a file; returns the bytes added (0 when the store
    already held it intact). A damaged file, or a link, in its place is replaced. A
    source whose bytes do not hash to `digest` (changed since it was hashed) is Refused,
    naming the digest it has."""
    dest = path_of(store, digest)
    try:
        read_verified(dest, digest)
        return 0
    except (Refused, OSError):
        pass  # not held, or held damaged: (re)written below
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".put-")
    try:
        # The source is the caller's own file (a link a user made to it is followed);
        # only what is read back from the store must be a regular file there.
        with os.fdopen(fd, "wb") as out, open(src, "rb") as fh:
            got, size = copy_hashed(fh, out)
        if got != digest:
            raise Refused(f"{src}: its bytes hash to {got[:12]}, expected {digest[:12]}")
        os.replace(tmp, dest)  # over a link, the link itself is replaced
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return size
