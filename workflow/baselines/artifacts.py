"""The goldens' artifact store: what it takes to measure a golden's baseline again (an
IREE case's compiled module and inputs, a torch case's model file), kept by content.

A file is stored under its SHA-256 (`<store>/<first two hex digits>/<digest>`), so two
goldens of one module share one copy and a golden names exactly the bytes it was
measured with. What is read back is verified against its name before it is used: a file
edited, cut short or replaced in the store is refused as damaged, never measured as the
baseline. The store sits beside the goldens (`<goldens>/artifacts/`) unless bless is told
another directory (large modules kept elsewhere), which the golden entry then names.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from workflow.records.storage import file_sha256

DEFAULT_NAME = "artifacts"  # <goldens>/artifacts/ unless bless names another directory


class Missing(Exception):
    """An artifact the store does not hold, or holds damaged (the message says which)."""


def path_of(store: str | Path, digest: str) -> Path:
    return Path(store) / digest[:2] / digest


def planned(src: str | Path) -> tuple[str, int]:
    """(digest, size) of a file to be stored: what a golden entry names."""
    src = Path(src)
    return file_sha256(src), src.stat().st_size


def put(store: str | Path, src: str | Path, digest: str) -> int:
    """Stores `src` under `digest` (its SHA-256, from `planned`), written to a temporary
    name and renamed, so a reader never sees half a file; returns the bytes added (0 when
    the store already held it intact). A source that changed since it was planned is
    refused: the golden would name bytes the store does not hold."""
    dest = path_of(store, digest)
    if dest.is_file() and file_sha256(dest) == digest:
        return 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".put-")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        got = file_sha256(tmp)
        if got != digest:
            raise Missing(f"{src}: changed since bless read it (sha256 {got[:12]}, "
                          f"expected {digest[:12]}); bless again")
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest.stat().st_size


def get(store: str | Path, digest: str) -> Path:
    """The stored file of `digest`, verified; Missing when it is absent, not a regular
    file, or its bytes no longer hash to its name."""
    path = path_of(store, digest)
    if path.is_symlink() or not path.is_file():
        raise Missing(f"{path}: not in the artifact store (pruned, or the goldens were "
                      "copied without their artifacts)")
    got = file_sha256(path)
    if got != digest:
        raise Missing(f"{path}: damaged (its bytes hash to {got[:12]}, not its name)")
    return path
