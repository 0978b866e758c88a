"""`benchflow history repair`: a damaged embedded store rebuilt from what survives in it.

What survives a full disk, a crash or a stray edit is the table's data parts
(store/<prefix>/<uuid>/all_<min>_<max>_<level>[_<mutation>]/: ClickHouse writes a part
once and never changes its files), while what breaks is small and benchflow's own to
remake: the table's definition (the DDL is history/sql.py's), the database's, the
marker. So repair makes a new table in a copy of the store (history/staging.py), links
every surviving part into it and attaches it (ClickHouse checks each part's checksums
as it does), and swaps the copy in. A part ClickHouse refuses is left out and named;
the damaged store's own files are set aside in the store (`damaged-<UTC time>/`), never
removed: repair keeps every byte it found. A store that opens whole is left alone."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

from workflow.errors import ConfigError
from workflow.history import engine, layout, sql, staging
from workflow.history.store import Store, _create, _lock, open_store

# A part's name: its partition (one, `all`), the block range it holds, its merge level
# and, once a mutation (`history remove`) rewrote it, the mutation's version.
PART = re.compile(r"all_(\d+)_(\d+)_(\d+)(?:_(\d+))?")


def repair(path: Path) -> dict:
    """{"repaired": bool, "rows", "runs", "parts" (attached), "lost" (part paths
    ClickHouse refused), "set_aside" (the damaged files' directory in the store)}.
    ConfigError when `path` is no store, or when nothing in it can be rebuilt from."""
    try:
        with open_store(path) as st:  # also finishes or undoes an interrupted write
            rows = st.rows(f"SELECT count() AS n, uniqExact({sql.RUN_ID}) AS runs "
                           f"FROM {sql.TABLE} FORMAT JSONEachRow")[0]
        return {"repaired": False, "rows": int(rows["n"]), "runs": int(rows["runs"]),
                "parts": 0, "lost": [], "set_aside": None}
    except layout.DamagedStore as exc:
        why = exc.problems[0]
    lock = _lock(path, required=True)
    try:
        staging.recover(path)
        parts = surviving_parts(path)
        if not parts:
            raise ConfigError([f"{path}: history store: nothing to rebuild it from: no data "
                               f"part survives under {path / 'store'}; it was left as it "
                               "was. Expected a backup of it, or the reports ingested again "
                               f"into a new store (the damage: {why})"])
        return _rebuild(path, parts)
    except OSError as exc:  # the copy's files on a full disk: the store as it was
        staging.abort(path)
        if layout.out_of_space(exc):
            raise engine.no_space(path, exc) from None
        raise
    finally:
        lock.release()


def surviving_parts(path: Path) -> list[Path]:
    """The parts of every table directory under store/ that no other part there covers
    (a merge's or a mutation's result covers its sources, which ClickHouse keeps on disk
    for a while: attached both, their rows would count twice)."""
    out = []
    for table in sorted(path.glob("store/*/*/format_version.txt")):
        found = []
        for part in table.parent.iterdir():
            m = PART.fullmatch(part.name)
            if m and part.is_dir() and (part / "checksums.txt").is_file():
                lo, hi, level, mutation = (int(g or 0) for g in m.groups())
                found.append(((lo, hi, level, mutation), part))
        out += [part for key, part in found
                if not any(_covers(other, key) for other, _ in found if other != key)]
    return out


def _covers(a: tuple, b: tuple) -> bool:
    """Whether part `a` holds every row of part `b` (ClickHouse's rule: a block range
    that contains b's, at a higher level or a later mutation)."""
    return a[0] <= b[0] and b[1] <= a[1] and (a[2], a[3]) >= (b[2], b[3])


def _rebuild(path: Path, parts: list[Path]) -> dict:
    work = path / layout.STAGING
    work.mkdir()
    try:
        session = engine.session(path, work, fresh=True)
    except BaseException:
        staging.abort(path)
        raise
    try:
        def query(statement: str) -> bytes:
            return engine.run(session, statement, path)

        _create(Store(where=str(path), _query=query, _send=None, _close=None))
        found = json.loads(query(
            "SELECT data_paths FROM system.tables WHERE database = "
            f"{sql.quote(sql.DATABASE)} AND name = 'oss_ci_benchmark_v3' FORMAT JSONEachRow"))
        detached = Path(found["data_paths"][0]) / "detached"
        attached, lost = _attach(query, parts, detached)
        counted = json.loads(query(f"SELECT count() AS n, uniqExact({sql.RUN_ID}) AS runs "
                                   f"FROM {sql.TABLE} FORMAT JSONEachRow"))
    except BaseException:
        session.close()
        staging.abort(path)
        raise
    session.close()
    if not attached:
        staging.abort(path)
        raise ConfigError([f"{path}: history store: nothing to rebuild it from: chdb "
                           f"refused every surviving part ({len(lost)}, e.g. "
                           f"{lost[0]}); it was left as it was. Expected a backup of it, "
                           "or the reports ingested again into a new store"])
    aside = layout.SET_ASIDE + datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    staging.commit(path, int(counted["n"]), set_aside=aside)
    return {"repaired": True, "rows": int(counted["n"]), "runs": int(counted["runs"]),
            "parts": attached, "lost": lost, "set_aside": str(path / aside)}


def _attach(query, parts: list[Path], detached: Path) -> tuple[int, list[str]]:
    """Each part linked into the new table's detached/ and attached; (how many were,
    the store-relative paths of those ClickHouse refused)."""
    attached, lost = 0, []
    for part in parts:
        target = detached / part.name
        shutil.copytree(part, target, copy_function=layout.link_or_copy)
        try:
            query(f"ALTER TABLE {sql.TABLE} ATTACH PART {sql.quote(part.name)}")
            attached += 1
        except ConfigError:
            raise  # a full disk: the whole repair stops, the store as it was
        except Exception:  # ClickHouse refused the part (its checksums, its columns)
            lost.append(str(part.relative_to(part.parents[3])))
        shutil.rmtree(target, ignore_errors=True)
    for left in detached.iterdir() if detached.is_dir() else []:
        shutil.rmtree(left, ignore_errors=True)  # a refused part, renamed by ClickHouse
    return attached, lost
