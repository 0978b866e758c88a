"""Opening a file a user named: only a regular file (or a directory where one is meant),
no more of it than a size cap, never blocking.

Every reader of a user's file (suites, torchao YAML, reports, goldens, results files,
benchmark files, MLIR existence checks) goes through read_bytes or file_problem, and
every user-named output through write_target. A FIFO would block a reader for ever,
/dev/zero would fill its memory, a symlink loop would raise RuntimeError from
Path.resolve(): each is a one-line ConfigError `path: is ...; expected ...` instead.

The check is made on the open descriptor (fstat), not on the path before opening it,
so a file swapped between the check and the read is still caught; O_NONBLOCK makes
opening a FIFO return at once instead of waiting for a writer (it changes nothing for
a regular file), O_NOCTTY keeps a terminal device from becoming our controlling one.
Symbolic links are followed (O_NOFOLLOW is not used): users link suites and benchmark
trees on purpose.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from workflow.errors import ConfigError

# What each kind of file is called in a message (stat's S_IS* tests, in order).
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))
LOOP = "is a symbolic link loop (ELOOP)"


def kind(mode: int) -> str:
    """What a file of this st_mode is, in words ("a FIFO (named pipe)", ...)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else f"a file of type {stat.S_IFMT(mode):o}"


def _dangling(path: Path) -> str | None:
    """'is a symbolic link to T, which does not exist' for a dangling link, else None."""
    if os.path.islink(path):
        try:
            return f"is a symbolic link to {os.readlink(path)}, which does not exist"
        except OSError:
            return "is a symbolic link to a file that does not exist"
    return None


def _os_problem(path: Path, exc: OSError) -> str | None:
    """The problem, in words, of an OSError that says what the path is (a loop, a
    dangling link, a socket: open() gives ENXIO); None for another error (absent,
    permission denied, ...), which the caller words."""
    if exc.errno == errno.ELOOP:
        return LOOP
    if exc.errno == errno.ENOENT:
        return _dangling(path)
    if exc.errno == errno.ENXIO:
        try:  # only for the message: what is there now
            return f"is {kind(os.stat(path).st_mode)}, not a regular file"
        except OSError:
            return None
    return None


def file_problem(path: str | Path) -> str | None:
    """Why `path` is no regular file to read ("is a FIFO (named pipe), not a regular
    file", "is a symbolic link loop (ELOOP)", "does not exist", ...), or None when it
    is one. For existence checks of files another program reads (MLIR, weights,
    @inputs): nothing is opened."""
    path = Path(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        found = _os_problem(path, exc)
        if found:
            return found
        return "does not exist" if exc.errno in (errno.ENOENT, errno.ENOTDIR) else \
            f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return f"is {kind(st.st_mode)}, not a regular file"
    return None


def _size_text(cap: int) -> str:
    return f"{cap // 2**20} MiB" if cap >= 2**20 and cap % 2**20 == 0 else f"{cap:,} bytes"


def read_bytes(path: str | Path, *, cap: int, what: str, hint: str = "",
               os_errors: bool = False) -> bytes:
    """The bytes of the regular file at `path`, at most `cap` of them.

    Raises ConfigError `path: problem; expected <what>` (one line) for anything else: a
    directory, FIFO, device or socket, a symbolic link loop or a dangling link, a file
    larger than `cap` (`hint` is added to that message), a missing or unreadable one.
    With `os_errors`, a missing or unreadable file raises its OSError unchanged instead
    (callers that take an absent file for "not written yet")."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        found = _os_problem(path, exc)
        if found:
            raise ConfigError([f"{path}: {found}; expected {what}"]) from None
        if os_errors:
            raise
        if exc.errno == errno.ENOENT:
            raise ConfigError([f"{path}: file not found"]) from None
        raise ConfigError([f"{path}: cannot be read ({exc.strerror or exc}); expected "
                           f"{what}"]) from None
    # Checked before fdopen, which itself refuses a directory with a less clear error.
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ConfigError([f"{path}: is {kind(mode)}, not a regular file; expected {what}"])
    with os.fdopen(fd, "rb") as fh:
        try:
            # One byte past the cap says it is larger (a file that grows meanwhile too).
            data = fh.read(cap + 1)
        except OSError as exc:
            if os_errors:
                raise
            raise ConfigError([f"{path}: cannot be read ({exc.strerror or exc}); expected "
                               f"{what}"]) from None
    if len(data) > cap:
        raise ConfigError([f"{path}: larger than {_size_text(cap)}; expected {what} below "
                           f"that{hint}"])
    return data


def directory_problem(path: str | Path) -> str | None:
    """Why an existing `path` is no directory ("is a FIFO (named pipe), not a
    directory", a loop, a dangling link), or None when it is one or does not exist
    (callers word absence: some create the directory, some require it)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return _os_problem(Path(path), exc)
    if not stat.S_ISDIR(st.st_mode):
        return f"is {kind(st.st_mode)}, not a directory"
    return None


def write_target(path: str | Path, *, what: str) -> Path:
    """Where writing `path` lands: the path itself, or for a symbolic link the file it
    points to (written through, as `cp` and editors do: the link is kept, never
    replaced by a file). Raises ConfigError for an output that exists and is no
    regular file (a directory, FIFO, device or socket: replacing it would destroy it,
    writing into it would block or vanish), a link loop or a dangling link (as GNU cp,
    not writing through it: where it points may be a typo)."""
    path = Path(path)
    problem = file_problem(path)
    if problem is not None and not os.path.lexists(path):
        return path  # absent: the write creates it (or names why it cannot)
    if problem is not None:
        # It was absent when judged and is there now: another writer created it between
        # the two looks (concurrent appends to one results file). Judge what is there.
        problem = file_problem(path)
    if problem is None:
        return Path(os.path.realpath(path)) if os.path.islink(path) else path
    raise ConfigError([f"{path}: {problem}; expected {what}"])
