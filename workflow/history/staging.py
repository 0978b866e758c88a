"""All or nothing: how a write (ingest, remove, repair) changes an embedded store.

chdb never writes the store itself. A write opens a copy of it, `<store>/staging` (a
part's files hard-linked, as layout.snapshot does, so the copy costs the new rows and a
few small files), and only once every statement succeeded and chdb closed it cleanly is
the copy swapped in: the copy's marker written (its row count), each of chdb's entries
of the store renamed into `<store>/previous`, the copy's renamed into place, the marker
last, then `previous` removed. A disk that fills, a chdb error or Ctrl-C before the
swap leaves the store exactly as it was (the copy is removed); renames need no space,
so a full disk cannot stop the swap half way. A crash during it (power, kill -9) leaves
`staging` and/or `previous`, which the next write (or `history repair`) sees before
anything else: a copy holding its marker was complete and is swapped in (the swap
finished), one without is removed (the write undone).

Why a copy and not chdb's own writes: ClickHouse rewrites the table's metadata file in
place on an ALTER, and a full disk left that file at 0 bytes; chdb then does not start
at all on the store ("Error initializing EmbeddedServer"), and every run in it is
unreachable."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from workflow.history import layout

# In a copy that sets aside what it replaces (repair's): the name it sets it aside as.
SET_ASIDE_FILE = "benchflow-set-aside"


def stage(path: Path) -> Path:
    """`<path>/staging`, a copy of the store's chdb entries (none for a new store)."""
    staging = path / layout.STAGING
    if staging.exists():  # a write stopped before it was complete (recover's job)
        shutil.rmtree(staging)
    layout.snapshot(path, into=staging)
    return staging


def abort(path: Path) -> None:
    """The write undone: its copy removed, the store untouched."""
    shutil.rmtree(path / layout.STAGING, ignore_errors=True)


def commit(path: Path, rows: int, set_aside: str | None = None) -> None:
    """The copy, closed by chdb and holding `rows`, swapped in (module docstring).
    `set_aside`: keep the entries it replaced under that name in the store (repair
    keeps a damaged store's files) instead of removing them."""
    staging = path / layout.STAGING
    if set_aside:  # what a swap that recover finishes keeps too
        (staging / SET_ASIDE_FILE).write_text(set_aside + "\n")
    # Its marker first: written, the copy is complete (recover swaps it in); a disk too
    # full for these few bytes stops the write here, the store as it was.
    layout.write_marker(staging, rows)
    _swap(path, staging, set_aside)


def _swap(path: Path, staging: Path, set_aside: str | None) -> None:
    """Renames only, each step one a crash may stop and recover finish: the store's
    entries the copy replaces into `previous` (or the set-aside directory), the copy's
    into place, its marker last (then the swap is done), the leftovers removed."""
    previous = path / (set_aside or layout.PREVIOUS)
    previous.mkdir(exist_ok=True)
    for name in _chdb_entries(staging):
        if (path / name).exists() or (path / name).is_symlink():
            os.rename(path / name, previous / name)
        os.rename(staging / name, path / name)
    os.replace(staging / layout.MARKER, path / layout.MARKER)
    shutil.rmtree(staging)
    if not set_aside:
        shutil.rmtree(previous)


def _chdb_entries(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n in layout.CHDB_ENTRIES)


def recover(path: Path) -> str | None:
    """An interrupted write finished or undone (module docstring), under the writer's
    lock; what was done ("finished", "undone", "cleaned") or None (nothing to do). What
    a repair set aside is never removed."""
    staging, previous = path / layout.STAGING, path / layout.PREVIOUS
    if staging.is_dir() and (staging / layout.MARKER).is_file():
        named = staging / SET_ASIDE_FILE
        aside = named.read_text().strip() if named.is_file() else None
        _swap(path, staging, aside if aside and aside.startswith(layout.SET_ASIDE) else None)
        return "finished"
    if staging.exists() and _chdb_entries(staging) and previous.exists():
        # The copy is incomplete, yet the swap began: cannot be (the marker is written
        # before it). Left for a person to look at, named.
        raise layout.damaged(path, f"both {staging} (no marker) and {previous} are there, "
                             "which no write of benchflow's leaves")
    done = None
    if staging.exists():
        # Incomplete (never swapped in: the store is as it was), or swapped in whole
        # (its marker moved, nothing of chdb's left in it): removed either way.
        done = "undone" if _chdb_entries(staging) else "cleaned"
        shutil.rmtree(staging)
    if previous.is_dir():
        shutil.rmtree(previous)  # the swap was done; only its leftovers were not removed
        done = done or "cleaned"
    return done
