"""File I/O for stage outputs and results files: atomic writes, so that a killed job never
leaves a half-written file that a later run would take for a result."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from workflow.errors import ConfigError, key_path
from workflow.files import read_bytes, write_target


class WriteError(OSError):
    """A file that could not be written, naming it and why ("No space left on device",
    "Read-only file system", ...). An OSError still (errno and filename kept), so callers
    that handle OSError keep working; the file it names was left as it was."""

    def __init__(self, path: str | Path, exc: OSError):
        super().__init__(exc.errno, exc.strerror or str(exc))
        self.filename = str(path)

    def __str__(self) -> str:
        return f"could not write {self.filename}: {self.strerror}"



def write_text(path: str | Path, text: str) -> None:
    """Writes a text file atomically (UTF-8) through atomic_writer: a reader or a crash
    sees the old or the new file whole; a failed write raises WriteError."""
    with atomic_writer(path) as fh:
        fh.write(text.encode("utf-8"))


@contextlib.contextmanager
def atomic_writer(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file to write `path`'s new content to, in blocks (a module or an MLIR file
    can be gigabytes) or by a library that takes a file (numpy, MLIR's bytecode writer):
    a temporary file in the same directory, flushed to disk, then os.replace()d over
    `path` when the block ends, so a reader or a crash sees the old or the new file whole.
    A library that takes only a path may write to `fh.name` (the temporary file's path)
    as long as nothing is written through `fh` itself. The file keeps the mode of the one
    it replaces, and a new file gets 0666 & ~umask as open() would give it: mkstemp's
    0600 would hide published results from a web server or an artifact uploader.

    A write that fails (a full or read-only file system, ...) removes its temporary file,
    leaves `path` as it was (absent, or the old file whole) and raises WriteError naming
    `path` and the reason; any other exception of the block is raised unchanged, after
    the same clean-up.

    A `path` that is a symbolic link is written through (its target replaced, the link
    kept, as cp and editors do); a directory, FIFO, device or socket, a link loop or a
    dangling link is refused with a ConfigError before anything is written."""
    path = write_target(path, what="a regular file to write")
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        fh = open(tmp, "wb")  # closed below (quietly when the block failed)
        try:
            yield fh
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        except BaseException:
            # close() flushes what the failed write left in the buffer and fails the same
            # way; the first error says it all (the file is closed regardless).
            with contextlib.suppress(OSError):
                fh.close()
            raise
        fh.close()
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            try:
                Path(tmp).unlink(missing_ok=True)
            except OSError:
                pass  # the original error says more than a failed clean-up would
        if isinstance(exc, OSError) and not isinstance(exc, WriteError):
            # Not chained: the OSError's errno and reason are the WriteError's own, and a
            # full disk must not print two tracebacks for one cause.
            raise WriteError(path, exc) from None
        raise


@contextlib.contextmanager
def side_lock(path: str | Path) -> Iterator[None]:
    """Holds an exclusive lock on the side file `path` (flock), which is gone again when
    it is released: a results file a user named (`benchflow run -o OUT.json`) gets no
    lasting OUT.json.lock beside it. Removed while still held, so a writer that opened
    it meanwhile finds, once it has the lock, that the path names another file or none,
    and opens it afresh: two writers never hold locks on two different files at once."""
    import fcntl

    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            now = os.stat(path)
        except FileNotFoundError:  # removed by the writer before us: try the new one
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


def write_json(path: str | Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=1, allow_nan=False) + "\n")


def _ran_out(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether a document that opens an object or a list failed only because its text
    ended: the parser stopped at the end, or inside a last string or literal. Judged on
    where the parse stopped, not on the last character: a copy cut right after an inner
    `}` ends with `}` too."""
    if text.lstrip()[:1] not in "{[" or exc.msg == "Extra data":
        return False
    rest = text[exc.pos:].rstrip()
    return (not rest or exc.msg.startswith("Unterminated string")
            or re.fullmatch(r"[\w.+-]+", rest) is not None)


def read_json(path: str | Path) -> Any:
    """A JSON file benchflow wrote (a stage's output): an absent or unreadable one raises
    its OSError, bad JSON a ValueError, as callers that rebuild it expect; a file that
    is not a regular one (a FIFO left there would block) or one past MAX_JSON_BYTES is a
    ConfigError naming it."""
    return json.loads(read_bytes(path, cap=MAX_JSON_BYTES, what="a JSON file",
                                 os_errors=True))


def seal(entry: dict) -> str:
    """The digest of an entry benchflow keeps to reuse (a cached export, a measured case),
    without its own `digest`: read back, an entry edited by hand or cut short no longer
    matches it (sealed), and is made or measured again rather than used."""
    import hashlib

    body = {k: v for k, v in entry.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def sealed(entry: dict) -> bool:
    return entry.get("digest") == seal(entry)


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, read in blocks (modules and MLIR can be gigabytes)."""
    import hashlib

    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fingerprint(path: str | Path) -> dict:
    """What a reader later checks a file against: its size, mtime and sha256."""
    st = Path(path).stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": file_sha256(path)}


def fingerprint_problem(path: str | Path, recorded: dict | None, *, quick: bool = False
                        ) -> str | None:
    """Why the file at `path` is not the one `recorded` (a fingerprint()) describes, or
    None when it is. The same size and mtime are taken as the same file when `quick`
    (the Snakefile's check of every finished case at load must stay cheap); otherwise,
    and whenever they differ, the bytes are hashed: a file touched but unchanged is
    still the same file, one edited, swapped or cut short is not."""
    if not recorded:
        return "no fingerprint was recorded for it"
    try:
        st = Path(path).stat()
    except FileNotFoundError:
        return "it is missing"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    if not Path(path).is_file():
        return "it is not a regular file"
    same_stat = st.st_size == recorded.get("size") and st.st_mtime_ns == recorded.get("mtime_ns")
    if quick and same_stat:
        return None
    try:
        if file_sha256(path) == recorded.get("sha256"):
            return None
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    if st.st_size != recorded.get("size"):
        return f"its size changed ({recorded.get('size')} -> {st.st_size} bytes)"
    return "its content changed since it was written (sha256 differs)"


def touch_empty(path: str | Path) -> None:
    """Creates an empty artifact for a failed stage.

    Snakemake requires every declared output; a failed stage still 'succeeds' as a
    job (failures are data), so its binary outputs exist but are empty and its
    stage JSON says why. Downstream stages read the JSON first and never the artifact.
    On a read-only file system it raises WriteError naming the artifact.
    """
    write_text(path, "")


# Far above any report benchflow writes (about 3.5 KB a case: 150,000 cases), far below
# what would exhaust a machine's memory when parsed.
MAX_JSON_BYTES = 512 * 2**20


def read_json_file(path: str | Path, *, constants_ok=None, unique_keys: bool = False) -> Any:
    """A JSON document a user gave benchflow (a benchmark file, a golden file, a report):
    any way it can be unreadable is a ConfigError `path: problem` in one line, never
    another exception. NaN and Infinity are refused unless `constants_ok(document)`
    says the document's format allows them (Forge's results lists). `unique_keys`, for
    files people edit by hand: a key given twice in one object is refused, where JSON
    readers keep the last value and drop the first without a word."""
    path = Path(path)
    # A FIFO, a device or a directory is refused, never read (files.read_bytes).
    raw = read_bytes(path, cap=MAX_JSON_BYTES, what="a JSON file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                           f"{exc.start})"]) from None
    if not text.strip():
        raise ConfigError([f"{path}: empty file"])
    constants: list[str] = []
    twice: list[tuple[dict, str]] = []  # (object, its key given twice)

    def pairs(items: list[tuple[str, Any]]) -> dict:
        obj = dict(items)
        if len(obj) < len(items):
            keys = [k for k, _ in items]
            twice.extend((obj, k) for k in obj if keys.count(k) > 1)
        return obj

    try:
        doc = json.loads(text, parse_constant=lambda name: constants.append(name) or
                         float(name), object_pairs_hook=pairs if unique_keys else None)
    except json.JSONDecodeError as exc:
        cut = " (truncated?)" if _ran_out(text, exc) else ""
        raise ConfigError([f"{path}: not valid JSON{cut}: {exc.msg} at line {exc.lineno} "
                           f"column {exc.colno}"]) from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise ConfigError([f"{path}: not valid JSON: {' '.join(str(exc).split())}"]) from None
    except RecursionError:
        raise ConfigError([f"{path}: not valid JSON: nested too deeply"]) from None
    if constants and not (constants_ok and constants_ok(doc)):
        raise ConfigError([f"{path}: not valid JSON: {constants[0]} is not a JSON number"])
    if twice:
        where = _paths_of(doc, {id(obj) for obj, _ in twice})
        raise ConfigError([f"{path}: {key_path(where[id(obj)] + [k])}: given twice; expected "
                           "each key once in an object (a JSON reader keeps the last value "
                           "and drops the first)" for obj, k in twice
                           # an object inside a dropped value: its parent's key is named
                           if id(obj) in where])
    return doc


def _paths_of(doc: Any, wanted: set[int]) -> dict[int, list]:
    """Where in a parsed document each wanted object (by identity) sits, as key_path parts.
    Hooks see an object before its parent exists, so its path is found afterwards."""
    found: dict[int, list] = {}
    stack: list[tuple[Any, list]] = [(doc, [])]
    while stack and len(found) < len(wanted):
        node, parts = stack.pop()
        if id(node) in wanted:
            found[id(node)] = parts
        items = (node.items() if isinstance(node, dict)
                 else enumerate(node) if isinstance(node, list) else ())
        stack.extend((child, parts + [key]) for key, child in items
                     if isinstance(child, (dict, list)))
    return found
