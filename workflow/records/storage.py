"""File I/O for stage outputs and results files: atomic writes, so that a killed job never
leaves a half-written file that a later run would take for a result."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


def write_text(path: str | Path, text: str) -> None:
    """Writes a file atomically: a temporary file in the same directory, flushed to disk,
    then os.replace()d over `path`, so a reader or a crash sees the old or the new file
    whole. The file keeps the mode of the one it replaces, and a new file gets
    0666 & ~umask as open() would give it: mkstemp's 0600 would hide published results
    from a web server or an artifact uploader."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=1, allow_nan=False) + "\n")


def read_json(path: str | Path) -> Any:
    with Path(path).open() as fh:
        return json.load(fh)


def touch_empty(path: str | Path) -> None:
    """Creates an empty artifact for a failed stage.

    Snakemake requires every declared output; a failed stage still 'succeeds' as a
    job (failures are data), so its binary outputs exist but are empty and its
    stage JSON says why. Downstream stages read the JSON first and never the artifact.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
