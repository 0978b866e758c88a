"""File I/O for stage outputs and results files: atomic writes, so that a killed job never
leaves a half-written file that a later run would take for a result."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from workflow.errors import ConfigError


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
    """Writes a file atomically: a temporary file in the same directory, flushed to disk,
    then os.replace()d over `path`, so a reader or a crash sees the old or the new file
    whole. The file keeps the mode of the one it replaces, and a new file gets
    0666 & ~umask as open() would give it: mkstemp's 0600 would hide published results
    from a web server or an artifact uploader.

    A write that fails (a full or read-only file system, ...) removes its temporary file,
    leaves `path` as it was (absent, or the old file whole) and raises WriteError naming
    `path` and the reason."""
    path = Path(path)
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
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            try:
                Path(tmp).unlink(missing_ok=True)
            except OSError:
                pass  # the original error says more than a failed clean-up would
        if isinstance(exc, OSError) and not isinstance(exc, WriteError):
            raise WriteError(path, exc) from exc
        raise


def write_json(path: str | Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=1, allow_nan=False) + "\n")


def read_json(path: str | Path) -> Any:
    with Path(path).open() as fh:
        return json.load(fh)


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
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")


# Far above any report benchflow writes (about 3.5 KB a case: 150,000 cases), far below
# what would exhaust a machine's memory when parsed.
MAX_JSON_BYTES = 512 * 2**20


def read_json_file(path: str | Path, *, constants_ok=None) -> Any:
    """A JSON document a user gave benchflow (a benchmark file, a golden file, a report):
    any way it can be unreadable is a ConfigError `path: problem` in one line, never
    another exception. NaN and Infinity are refused unless `constants_ok(document)`
    says the document's format allows them (Forge's results lists)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError([f"{path}: is a directory, not a file"])
    try:
        # A FIFO or a device would block or never end: only a regular file is read, and
        # no more of it than MAX_JSON_BYTES (one byte past says it is larger).
        if path.exists() and not stat.S_ISREG(path.stat().st_mode):
            raise ConfigError([f"{path}: not a regular file; expected a JSON file"])
        with path.open("rb") as fh:
            raw = fh.read(MAX_JSON_BYTES + 1)
        if len(raw) > MAX_JSON_BYTES:
            raise ConfigError([f"{path}: larger than {MAX_JSON_BYTES:,} bytes; "
                               "expected a JSON file below that"])
    except FileNotFoundError:
        raise ConfigError([f"{path}: file not found"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read it: {exc.strerror or exc}"]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                           f"{exc.start})"]) from None
    if not text.strip():
        raise ConfigError([f"{path}: empty file"])
    constants: list[str] = []
    try:
        doc = json.loads(text, parse_constant=lambda name: constants.append(name) or
                         float(name))
    except json.JSONDecodeError as exc:
        stripped = text.strip()
        cut = (" (truncated?)" if stripped[:1] in "{[" and exc.msg != "Extra data"
               and not stripped.endswith(("}", "]")) else "")
        raise ConfigError([f"{path}: not valid JSON{cut}: {exc.msg} at line {exc.lineno} "
                           f"column {exc.colno}"]) from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise ConfigError([f"{path}: not valid JSON: {' '.join(str(exc).split())}"]) from None
    except RecursionError:
        raise ConfigError([f"{path}: not valid JSON: nested too deeply"]) from None
    if constants and not (constants_ok and constants_ok(doc)):
        raise ConfigError([f"{path}: not valid JSON: {constants[0]} is not a JSON number"])
    return doc
