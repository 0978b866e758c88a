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

from pathlib import Path

from workflow.records import blobs
from workflow.records.storage import file_sha256

DEFAULT_NAME = "artifacts"  # <goldens>/artifacts/ unless bless names another directory
path_of = blobs.path_of  # the store's layout is records/blobs.py's


class Missing(Exception):
    """An artifact the store does not hold, or holds damaged (the message says which)."""


def planned(src: str | Path) -> tuple[str, int]:
    """(digest, size) of a file to be stored: what a golden entry names."""
    src = Path(src)
    return file_sha256(src), src.stat().st_size


def put(store: str | Path, src: str | Path, digest: str) -> int:
    """Stores `src` under `digest` (its SHA-256, from `planned`): blobs.put, which writes
    a temporary name and renames it, so a reader never sees half a file; returns the
    bytes added (0 when the store already held it intact). A source that changed since
    it was planned is refused: the golden would name bytes the store does not hold."""
    try:
        return blobs.put(store, src, digest)
    except blobs.Refused as exc:
        raise Missing(f"{src}: changed since bless read it ({exc}); bless again") from None


def get(store: str | Path, digest: str) -> Path:
    """The stored file of `digest`, verified; Missing when it is absent, not a regular
    file, or its bytes no longer hash to its name."""
    try:
        return blobs.get(store, digest)
    except blobs.Refused as exc:
        if exc.absent:
            raise Missing(f"{path_of(store, digest)}: not in the artifact store (pruned, or "
                          "the goldens were copied without their artifacts)") from None
        raise Missing(str(exc)) from None
