"""What an embedded history store's directory is, before chdb is let at it: benchflow's
marker (`benchflow-store.json`, written when `ingest` creates the store and rewritten
after every write with the row count then held), chdb's own layout (metadata/*.sql,
metadata/<db>/<table>.sql, data/, store/<uuid>/<part>/...), and a snapshot to read from.

Why before: chdb moves a part it finds cut short to detached/broken-on-start_* when it
starts, and answers "no rows" for it; a table whose metadata file is missing is simply
absent, and benchflow's CREATE TABLE IF NOT EXISTS would then make a new, empty one over
the old data. So the directory is judged first (an allow-list of what a store holds),
reads run on a snapshot of it (parts hard-linked: ClickHouse never changes a part's
files in place; everything else copied), and a write first opens such a snapshot to see
what chdb makes of the store. A store made before the marker existed (chdb's layout with
benchflow's table, no marker) is a legacy store: it opens, and gets its marker at its
next write."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from pathlib import Path

from workflow.errors import ConfigError
from workflow.files import read_bytes

MARKER = "benchflow-store.json"
FORMAT = "benchflow-history-store"
VERSION = 1
LOCK_NAME = "benchflow.lock"
TABLE_SQL = Path("metadata", "benchmark", "oss_ci_benchmark_v3.sql")
DATABASE_SQL = Path("metadata", "benchmark.sql")
# What chdb (ClickHouse's embedded server) keeps in its directory, and benchflow's own
# files beside it (its lock; an insert's rows file a crash left behind).
CHDB_ENTRIES = frozenset({"metadata", "data", "store", "tmp", "user_files", "format_schemas",
                          "flags", "metadata_dropped", "status", "preprocessed_configs",
                          "user_scripts", "dictionaries_lib", "access",
                          "named_collections", "user_defined", "uuid"})
# A write's copy of the store (history/staging.py), the entries it replaced while it
# is swapped in, and what `history repair` set aside.
STAGING, PREVIOUS, SET_ASIDE = "staging", "previous", "damaged-"
OWN_ENTRIES = frozenset({MARKER, LOCK_NAME, MARKER + ".tmp", STAGING, PREVIOUS})
MAX_MARKER_BYTES = 64 * 1024


class DamagedStore(ConfigError):
    """A store that is benchflow's but cannot be read whole (`history repair`'s case)."""


def out_of_space(exc: BaseException | str) -> bool:
    """Whether `exc` (chdb's, the OS's, or what chdb printed) says the file system is full:
    by errno, or in the words of chdb, the OS and shutil (whose Error has no errno)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(exc)
    return any(word in text for word in ("NOT_ENOUGH_SPACE", "No space left on device",
                                         "Cannot reserve", "Disk quota exceeded"))


def damaged(path: Path, what: str) -> ConfigError:
    return DamagedStore([f"{path}: history store is damaged: {what}; it was left as it was. "
                        "Expected an intact store: `benchflow history repair --store "
                        f"{path}` rebuilds it from the runs that survive (setting the "
                        "damaged files aside in it), or restore it from a backup"])


def not_a_store(path: Path, why: str) -> ConfigError:
    return ConfigError([f"{path}: not a benchflow history store ({why}); expected an "
                        "empty or new directory for `benchflow history ingest`, or a store "
                        f"it made (it holds {MARKER})"])


def _own(name: str) -> bool:
    return name in OWN_ENTRIES or name.startswith(SET_ASIDE) or \
        (name.startswith("insert-") and name.endswith(".jsonl"))


def state(path: Path) -> tuple[str, dict | None]:
    """("absent" | "empty" | "marked" | "legacy" | "interrupted", the marker or None);
    raises ConfigError for a directory that is no store or a damaged one (module
    docstring). "interrupted": a write stopped with its copy still there, or part way
    through swapping it in (staging.recover finishes or undoes it)."""
    if not path.exists():
        return "absent", None
    if not path.is_dir():
        raise not_a_store(path, "it is not a directory")
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise ConfigError([f"{path}: history store: cannot list it ({exc.strerror}); "
                           "expected a readable directory"]) from None
    if all(_own(n) and n != MARKER for n in names):
        return "empty", None
    foreign = [n for n in names if n not in CHDB_ENTRIES and not _own(n)]
    if foreign:
        shown = ", ".join(repr(n) for n in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise not_a_store(path, f"it holds {shown}, which a store does not")
    if STAGING in names or PREVIOUS in names:
        return "interrupted", None
    marker = read_marker(path) if MARKER in names else None
    if not (path / DATABASE_SQL).is_file() or not (path / TABLE_SQL).is_file():
        missing = DATABASE_SQL if not (path / DATABASE_SQL).is_file() else TABLE_SQL
        if marker is None and not (path / "metadata").is_dir():
            raise not_a_store(path, f"no {MARKER} and no chdb metadata/")
        raise damaged(path, f"the table's metadata file {missing} is missing")
    _check_definition(path)
    return ("marked" if marker is not None else "legacy"), marker


def _check_definition(path: Path) -> None:
    """The table's definition as chdb wrote it (`ATTACH TABLE _ UUID ...`): one a full
    disk left empty, or any other text, stops chdb's server from starting at all, with
    its reason on stderr and only "Error initializing EmbeddedServer" raised."""
    try:
        head = read_bytes(path / TABLE_SQL, cap=MAX_MARKER_BYTES,
                          what="the table's definition").decode("utf-8", errors="replace")
    except ConfigError as exc:
        raise damaged(path, f"the table's metadata file {TABLE_SQL} is unreadable "
                      f"({' '.join(exc.problems[0].split())[:80]})") from None
    if not head.strip():
        raise damaged(path, f"the table's metadata file {TABLE_SQL} is empty (a full disk "
                      "cut its rewrite short)")
    if not head.startswith("ATTACH TABLE _ UUID '") or "ENGINE = MergeTree" not in head:
        raise damaged(path, f"the table's metadata file {TABLE_SQL} is not the table's "
                      "definition chdb writes")


def read_marker(path: Path) -> dict:
    try:
        # A regular file of at most the cap, opened once (files.read_bytes).
        raw = read_bytes(path / MARKER, cap=MAX_MARKER_BYTES, what="benchflow's store marker")
        doc = json.loads(raw.decode("utf-8", errors="replace"))
    except (ConfigError, ValueError) as exc:
        why = exc.problems[0] if isinstance(exc, ConfigError) else str(exc)
        raise damaged(path, f"{MARKER} is unreadable ({' '.join(why.split())[:80]})"
                      ) from None
    rows = doc.get("rows") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT \
            or isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise damaged(path, f"{MARKER} is not benchflow's marker (format {FORMAT!r}, rows)")
    if not isinstance(doc.get("version"), int) or doc["version"] > VERSION:
        raise ConfigError([f"{path}: {MARKER}: version {doc.get('version')!r}; expected at "
                           f"most {VERSION} (a newer benchflow made this store)"])
    return doc


def write_marker(path: Path, rows: int) -> None:
    """Atomically: a reader never sees half a marker."""
    tmp = path / (MARKER + ".tmp")
    tmp.write_text(json.dumps({"format": FORMAT, "version": VERSION, "rows": rows}) + "\n")
    os.replace(tmp, path / MARKER)


def detached(path: Path) -> set[str]:
    """Every detached part (store/<prefix>/<uuid>/detached/<name>) by its path."""
    return {str(p.relative_to(path)) for p in path.glob("store/*/*/detached/*")}


def snapshot(path: Path, into: Path | None = None) -> Path:
    """A private copy of the store to open: files under store/ other than .sql are
    hard-linked where the filesystem allows (a part's files are immutable), else copied;
    benchflow's own files are left out. `into`: the directory to make (a write's copy,
    history/staging.py), else a new one in the temporary directory. The caller removes
    it. A full disk is raised as its OSError (the caller names it)."""
    if into is None:
        out = Path(tempfile.mkdtemp(prefix="benchflow-history-"))
    else:
        out = into
        out.mkdir()
    try:
        for name in os.listdir(path):
            src, dst = path / name, out / name
            if _own(name):
                continue
            if src.is_dir() and not src.is_symlink():
                copy = link_or_copy if name == "store" else shutil.copy2
                shutil.copytree(src, dst, symlinks=True, copy_function=copy)
            else:
                shutil.copy2(src, dst, follow_symlinks=False)
    except OSError as exc:
        shutil.rmtree(out, ignore_errors=True)
        # shutil.copytree gathers its files' errors into one shutil.Error, errno None.
        if out_of_space(exc):
            raise
        raise ConfigError([f"{path}: history store: cannot read it ({exc.strerror}: "
                           f"{exc.filename}); expected a readable store"]) from None
    return out


def link_or_copy(src: str, dst: str) -> str:
    if not src.endswith(".sql"):
        try:
            os.link(src, dst)
            return dst
        except OSError:  # another filesystem, a read-only mount: a copy then
            pass
    return shutil.copy2(src, dst)
