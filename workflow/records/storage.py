"""File I/O for stage outputs: atomic JSON writes, so that a killed job never leaves
a half-written file that a later run would take for a result."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text(path: str | Path, text: str) -> None:
    """Writes a file atomically (temp file + rename), readable by all: mkstemp's 0600
    would hide published results from a web server or an artifact uploader."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
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
