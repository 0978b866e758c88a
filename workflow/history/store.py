"""The history store: an embedded ClickHouse (chdb) database in a directory, or a
ClickHouse server (clickhouse-connect, the optional `clickhouse` extra). Both take the
same SQL text (history/sql.py) and give rows back as JSONEachRow-decoded dicts.

chdb keeps one embedded server per process, bound to one directory: a second path in
the same process is refused by chdb itself, so the open store is shared (reference
counted) and a second directory while one is open is an error naming both. Between
processes chdb locks `<dir>/status` and a second process fails at once ("Another server
instance in same directory is already running"); benchflow's own lock
(`<dir>/benchflow.lock`) makes a second benchflow process wait its turn instead. What a
store directory is, and how a damaged one is told, is history/layout.py's; chdb never
writes the store itself: a read runs on a snapshot, a write on a copy swapped in whole
at its close or not at all (history/staging.py); what fails in chdb is told at the
boundary (history/engine.py)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from filelock import FileLock, Timeout

from workflow.errors import ConfigError
from workflow.history import engine, layout, sql, staging

LOCK_TIMEOUT_S = 120
LOCK_NAME = layout.LOCK_NAME


@dataclass
class _Embedded:
    path: Path         # the store
    session: object
    lock: FileLock | None
    dir: Path          # where the session runs: the store, or a snapshot of it (reads)
    write: bool = False
    users: int = 0
    created: list[str] = field(default_factory=list)  # the statements that made the table
    failed: bool = False    # a write's statement failed: its copy is not swapped in
    made_dir: bool = False  # a write that made the store's directory


_OPEN: dict[str, _Embedded] = {}


@dataclass
class Store:
    """One connection; `where` names it in messages (a directory or a server URL with
    its password left out)."""
    where: str
    _query: object = field(repr=False)  # (sql, fmt) -> bytes
    _send: object = field(repr=False)   # (statement, names, types, JSON lines) -> None
    _close: object = field(repr=False)
    statements: list[str] = field(default_factory=list, repr=False)
    closed: bool = False
    column_types: dict[str, str] | None = field(default=None, repr=False)
    _abort: object = field(default=None, repr=False)  # () -> None; None: nothing to undo

    def execute(self, statement: str) -> None:
        self.statements.append(statement)
        self._query(statement)

    def rows(self, statement: str) -> list[dict]:
        """A SELECT ending in FORMAT JSONEachRow, decoded."""
        self.statements.append(statement)
        data = self._query(statement)
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    def insert(self, rows: list[dict]) -> None:
        """Full v3 rows. Sent grouped: the rows that share every column but `metric` (a
        case's metrics) are one JSON line holding their metrics, which ClickHouse
        unfolds (ARRAY JOIN) into the table's rows: a 10,000-case report's 70,000 rows
        are 28 MB of JSON instead of 127 MB, made and parsed in 1.3 s instead of 2.6 s.
        The statement reads the lines from `input()`: a server from the request body;
        the embedded store from a file (sql.insert_rows names the source)."""
        if not rows:
            return
        types = self._types()
        for names, data in grouped_lines(rows):
            statement = sql.insert_rows(names, types, sql.input_source(names, types)) \
                + " FORMAT JSONEachRow"
            self.statements.append(statement)
            self._send(statement, names, types, data)

    def _types(self) -> dict[str, str]:
        if self.column_types is None:
            self.column_types = {r["name"]: r["type"] for r in self.rows(sql.columns())}
        return self.column_types

    def abort(self) -> None:
        """What this connection wrote is not kept at its close (an embedded store's
        write, history/staging.py); a server's rows, once sent, are its own."""
        if self._abort is not None:
            self._abort()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def grouped_lines(rows: list[dict]) -> list[tuple[list[str], bytes]]:
    """(the columns besides `metric`, their JSON lines): one line per group of rows equal
    in every other column (by identity, or value for a number or string: an importer's
    rows share a case's objects), holding the group's metrics as `metrics`. Rows that
    name other columns (a v3 file's row with `_meta`) are a group set of their own."""
    encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    by_names: dict[tuple, dict[tuple, tuple[dict, list]]] = {}
    for row in rows:
        names = tuple(k for k in row if k != "metric")
        groups = by_names.setdefault(names, {})
        key = tuple(v if isinstance(v, (int, float, str)) else id(v)
                    for v in (row[k] for k in names))
        group = groups.get(key)
        if group is None:
            group = groups[key] = (row, [])
        group[1].append(row["metric"])
    out = []
    for names, groups in by_names.items():
        lines = [encode({**{k: row[k] for k in names}, "metrics": metrics})
                 for row, metrics in groups.values()]
        out.append((list(names), "\n".join(lines).encode()))
    return out


def open_store(path: Path | str | None = None, url: str | None = None, *,
               write: bool = False, create: bool = False) -> Store:
    """The store at `path` (an embedded database directory) or `url` (a ClickHouse
    server, `http[s]://user:pass@host:port/database`); exactly one. The table exists
    when this returns. An embedded store is judged before chdb opens it (history/
    layout.py): one read (`write=False`) runs on a snapshot and needs no write access;
    only `create` makes a new store, and only in an empty or absent directory."""
    if (path is None) == (url is None):
        raise AssertionError("open_store: exactly one of path and url")
    if path is not None:
        return _open_embedded(Path(path), write=write, create=create)
    store = _open_server(url)
    try:
        _create(store)
    except BaseException:
        store.close()
        raise
    return store


def _create(store: Store) -> None:
    store.execute(sql.create_database())
    store.execute(sql.create_table())
    for statement in sql.add_projections():
        store.execute(statement)


def _open_embedded(path: Path, *, write: bool, create: bool) -> Store:
    key = str(path.resolve())
    held = _OPEN.get(key)
    if held is not None and write and not held.write:
        raise ConfigError([f"{path}: history store: open for reading in this process; "
                           "expected it closed before it is written"])
    if held is None:
        if _OPEN:
            other = next(iter(_OPEN))
            raise ConfigError([f"{path}: history store: another store ({other}) is open "
                               "in this process; expected one embedded store at a time "
                               "(chdb runs one embedded server per process)"])
        held = _start_embedded(path, write=write, create=create)
        _OPEN[key] = held
    held.users += 1

    def query(statement: str) -> bytes:
        try:
            return engine.run(held.session, statement, path)
        except BaseException:
            held.failed = True  # a write with a failed statement is never swapped in
            raise

    def close() -> None:
        held.users -= 1
        if held.users == 0:
            del _OPEN[key]
            _stop(held, query)

    def abort() -> None:
        held.failed = True

    def send(_statement: str, names: list[str], types: dict, data: bytes) -> None:
        # The same INSERT reading the lines from a file instead of input() (chdb takes
        # no request body). In the write's copy of the store: the rows of a big run stay
        # on the disk that will hold them anyway.
        try:
            with tempfile.NamedTemporaryFile(dir=held.dir, prefix="insert-",
                                             suffix=".jsonl") as f:
                f.write(data)
                f.flush()
                query(sql.insert_rows(names, types, sql.file_source(f.name, names, types)))
        except OSError as exc:
            held.failed = True
            if layout.out_of_space(exc):
                raise engine.no_space(path, exc) from None
            raise

    # A fresh store's CREATE statements, as a server's Store records them (the same
    # statements reach both).
    return Store(where=str(path), _query=query, _send=send, _close=close,
                 statements=list(held.created), _abort=abort)


def _stop(held: _Embedded, query) -> None:
    """Closes the session. A write's copy is swapped in when every statement of it
    succeeded (its row count in the marker, what the next open compares), else removed,
    the store as it was (history/staging.py); a read's snapshot is removed."""
    try:
        if not held.write:
            held.session.close()
        elif held.failed:
            try:
                held.session.close()
            finally:
                staging.abort(held.path)
        else:
            _commit(held, query)
    finally:
        if not held.write:
            shutil.rmtree(held.dir, ignore_errors=True)
        _release(held.path, held.lock, held.made_dir)


def _commit(held: _Embedded, query) -> None:
    try:
        rows = _count(query)
        held.session.close()
        staging.commit(held.path, rows)
    except BaseException as exc:
        # Before the swap began (the copy's marker is its first step): undone. A swap
        # stopped half way (it renames only, so no full disk stops it) is finished by
        # the next open (staging.recover).
        if not (held.path / layout.STAGING / layout.MARKER).exists():
            staging.abort(held.path)
        if layout.out_of_space(exc):
            raise engine.no_space(held.path, exc) from None
        raise


def _release(path: Path, lock: FileLock | None, made_dir: bool) -> None:
    """The lock released; a store directory this write made and left empty (a new
    store the disk had no room for) removed, as it was before: absent."""
    if lock is not None:
        lock.release()
    if made_dir and path.is_dir() and set(os.listdir(path)) <= {LOCK_NAME}:
        shutil.rmtree(path, ignore_errors=True)


class NoStore(ConfigError):
    """No embedded store where one was to be read: bad input, which every `benchflow
    history` verb exits 2 for, as `detect` (a gate) does. Names the directory looked at,
    whence a relative one was read."""

    def __init__(self, path: Path):
        whence = "" if path.is_absolute() else f" (from {Path.cwd()})"
        super().__init__([f"{path}: no history store there{whence}; expected the directory "
                          "that `benchflow history ingest` (or `snakemake "
                          "results/history.html`) made, or --store/--url"])


def _count(query) -> int:
    out = query(f"SELECT count() AS n FROM {sql.TABLE} FORMAT JSONEachRow")
    return int(json.loads(out)["n"])


def _start_embedded(path: Path, *, write: bool, create: bool) -> _Embedded:
    kind, marker = layout.state(path)
    if kind in ("absent", "empty") and not (write and create):
        raise NoStore(path)
    made_dir = kind == "absent"
    if made_dir:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError([f"{path}: history store: cannot create the directory "
                               f"({exc.strerror}); expected a writable directory"]) from exc
    lock = _lock(path, required=write)
    try:
        if kind == "interrupted":
            _recover(path, lock)
            kind, marker = layout.state(path)
        if not write:
            # Read from a snapshot: chdb never writes the store to read it.
            copy = layout.snapshot(path)
            seen, _ = _start_checked(path, copy, marker)
            return _Embedded(path=path, session=seen, lock=lock, dir=copy)
        # A write works on a copy, swapped in at its close (history/staging.py).
        work = staging.stage(path)
        session, made = _start_checked(path, work, marker, fresh=kind in ("absent", "empty"),
                                       write=True)
        return _Embedded(path=path, session=session, lock=lock, dir=work, write=True,
                         created=made, made_dir=made_dir)
    except BaseException as exc:
        if write:
            staging.abort(path)
        _release(path, lock, made_dir)
        if layout.out_of_space(exc):
            raise engine.no_space(path, exc) from None
        raise


def _recover(path: Path, lock: FileLock | None) -> None:
    """A write that was stopped part way, finished or undone before anything reads or
    writes the store; a reader that cannot take the lock (a read-only store) cannot."""
    if lock is None:
        raise layout.damaged(path, "a write to it was stopped part way (its "
                             f"{layout.STAGING}/ or {layout.PREVIOUS}/ is there) and this "
                             "process may not write it to finish or undo that")
    staging.recover(path)


def _start_checked(path: Path, where: Path, marker: dict | None, fresh: bool = False,
                   write: bool = False) -> tuple[object, list[str]]:
    """A chdb session on `where` (a copy of the store: a snapshot, or a write's copy)
    once it holds what `path`'s marker says: the table there, no part chdb set aside as
    broken when it started, at least the rows the last write left (more: a legacy store
    or one an older benchflow wrote in place). With it, the statements that created a
    fresh store's table."""
    before = layout.detached(where)
    try:
        session = engine.session(path, where, fresh)
    except BaseException:
        shutil.rmtree(where, ignore_errors=True)
        raise
    try:
        def query(statement: str) -> bytes:
            return engine.run(session, statement, path)

        if fresh:
            made = Store(where=str(path), _query=query, _send=None, _close=None)
            _create(made)
            return session, made.statements
        broken = sorted(layout.detached(where) - before)
        if broken:  # named where it lies in the store: chdb moved only its copy's
            part = Path(broken[0])
            part = part.parent.parent / part.name.split("_", 1)[-1]
            raise layout.damaged(path, f"a part is cut short or corrupt ({part}; chdb "
                                 "cannot load it)")
        tables = query("SELECT count() AS n FROM system.tables WHERE database = "
                       f"{sql.quote(sql.DATABASE)} AND name = 'oss_ci_benchmark_v3' "
                       "FORMAT JSONEachRow")
        if int(json.loads(tables)["n"]) != 1:
            raise layout.damaged(path, f"chdb finds no table {sql.TABLE} in it")
        rows = _count(query)
        if marker is not None and rows < marker["rows"]:
            raise layout.damaged(path, f"it holds {rows} rows, {marker['rows']} when "
                                 "benchflow last wrote it")
        if write:
            _add_projections(query)
        return session, []
    except BaseException:
        session.close()
        shutil.rmtree(where, ignore_errors=True)
        raise


def _add_projections(query) -> None:
    """A legacy store's projections, where it lacks them. Only then: ClickHouse rewrites
    the table's definition on every ALTER, even one that changes nothing."""
    table = json.loads(query("SELECT create_table_query AS q FROM system.tables WHERE "
                             f"database = {sql.quote(sql.DATABASE)} AND name = "
                             "'oss_ci_benchmark_v3' FORMAT JSONEachRow"))["q"]
    for statement in sql.add_projections():
        name = statement.split("IF NOT EXISTS ", 1)[1].split()[0]
        if f"PROJECTION {name} " not in table:
            query(statement)


def _lock(path: Path, *, required: bool) -> FileLock | None:
    """benchflow's lock of the store: a writer waits for it; a reader takes it where it
    can (so that it never snapshots an ingest half done), and reads without it where the
    directory cannot be written (a read-only mount has no writer)."""
    if not required and not os.access(path, os.W_OK):
        return None
    lock = FileLock(str(path / LOCK_NAME))
    try:
        lock.acquire(timeout=LOCK_TIMEOUT_S)
    except Timeout as exc:
        raise ConfigError([f"{path}: history store: another benchflow process held it "
                           f"for {LOCK_TIMEOUT_S} s; expected it free"]) from exc
    except OSError as exc:
        if not required:
            return None
        raise ConfigError([f"{path}: history store: cannot lock it ({exc.strerror}); "
                           "expected a writable directory (ingest and remove write)"]) from None
    return lock


def _open_server(url: str) -> Store:
    try:
        import clickhouse_connect  # optional: pip install benchflow[clickhouse]
    except ImportError as exc:
        raise ConfigError([f"{without_password(url)}: history.url: clickhouse-connect is "
                           "not installed; expected `pip install benchflow[clickhouse]`"]
                          ) from exc
    from clickhouse_connect.driver.exceptions import OperationalError

    where = without_password(url)
    # clickhouse-connect also logs a failed connection on its own: the error below says it.
    quiet = logging.getLogger("clickhouse_connect")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        client = clickhouse_connect.get_client(dsn=url)
    except OperationalError as exc:
        # A server that is not there (a typo'd host or port) is the user's input: one
        # line naming it, its password left out, never a traceback.
        reason = " ".join(str(exc).split())[:200].replace(url, where)
        raise ConfigError([f"{where}: history.url: cannot reach the ClickHouse server "
                           f"({reason}); expected a running server at that URL"]) from None
    finally:
        quiet.setLevel(level)

    def query(statement: str) -> bytes:
        # raw_query: the server's own bytes in the FORMAT the statement names, so both
        # paths decode the same JSONEachRow.
        return client.raw_query(statement)

    def send(statement: str, _names, _types, data: bytes) -> None:
        # The statement, then the lines as the request's body (input()).
        client.command(statement, data=data)

    return Store(where=where, _query=query, _send=send, _close=client.close)


def without_password(url: str) -> str:
    """A server's URL as messages and pages name it: its password replaced by ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
