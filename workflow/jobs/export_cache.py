"""The export cache (opt-in: the directory named by BENCHFLOW_EXPORT_CACHE): a workload's
export made once on a machine, copied into every suite directory that needs it.

An export is shared by the SKUs of one suite directory through its content key
(jobs/iree.export). Several suite directories on one machine (A/B of revisions, a
bisection, several suites) each made the same byte-identical export again, a torch
process of 4 to 18 s each. With the cache, a successful export is also stored under its
content key (planning/keys.export_parts: the spec, the model's sources, the exporter's
code, the torch and FX importer builds), and an export whose key is there is copied,
verified, instead of made.

Layout: `<cache>/files/` is a content-addressed store of the files (records/blobs.py:
each under its sha256, so an entry's files are never half-written and two entries of
the same bytes share them); `<cache>/exports/<2 hex>/<key>.json` is the entry, naming
each file's sha256 and size beside the export's own data and its key's parts, with a
digest of itself. An entry is written to a temporary file and renamed over the old one,
after its files are stored: two jobs racing store one whole entry or the other, never a
mix. Read back, an entry is refused (the export is then made and the entry replaced)
when it is no regular file, its digest, key or parts disagree, or a file it names is
absent, a link, or not the bytes it says. Failures are never stored.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from workflow.errors import ConfigError
from workflow.planning import keys
from workflow.records import blobs
from workflow.records.storage import WriteError, atomic_writer, seal, sealed, write_json

CACHE_ENV = "BENCHFLOW_EXPORT_CACHE"
FORMAT = "benchflow export cache entry 1"
ROLES = ("mlir", "inputs", "reference")
MAX_ENTRY_BYTES = 64 * 2**20  # an entry is a few KB: past this it is no entry of ours


def cache_dir() -> Path | None:
    """The cache directory BENCHFLOW_EXPORT_CACHE names (absolute: a relative one is taken
    from the current directory), or None when it is unset or empty: no cache."""
    named = os.environ.get(CACHE_ENV, "").strip()
    return Path(os.path.abspath(os.path.expanduser(named))) if named else None


def entry_path(cache: Path, key: str) -> Path:
    return cache / "exports" / key[:2] / f"{key}.json"


def store(cache: Path, key: str, parts: dict, files: dict[str, dict], data: dict) -> Path:
    """Stores a successful export: its files (role -> path, with the sha256 each was
    fingerprinted with: `files[role]` is {"path", "sha256"}) into the content-addressed
    store, then its entry; returns the entry's path. A file that changed since it was
    fingerprinted is refused (blobs.Refused), and nothing is stored for the key."""
    named = {}
    for role in ROLES:
        src, digest = files[role]["path"], files[role]["sha256"]
        blobs.put(cache / "files", src, digest)
        named[role] = {"sha256": digest, "size": os.stat(src).st_size}
    entry = {"format": FORMAT, "key": key, "parts": parts, "files": named, "data": data,
             "made_in": os.getcwd(),
             "made_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    entry["digest"] = seal(entry)
    path = entry_path(cache, key)
    if path.is_symlink():
        path.unlink(missing_ok=True)  # replaced by a file of ours, never written through
    write_json(path, entry)
    return path


def read_entry(cache: Path, key: str, parts: dict) -> dict:
    """The entry of `key`, checked: Refused (absent when there is none) unless it is a
    regular file holding a sealed entry of this key and these parts."""
    path = entry_path(cache, key)
    with blobs.open_regular(path) as fh:
        raw = fh.read(MAX_ENTRY_BYTES + 1)
    try:
        entry = json.loads(raw)
    except (ValueError, RecursionError):
        raise blobs.Refused(f"{path}: not valid JSON (cut short?)") from None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        raise blobs.Refused(f"{path}: not an entry of this cache (format "
                            f"{entry.get('format') if isinstance(entry, dict) else '?'!r})")
    if not sealed(entry):
        raise blobs.Refused(f"{path}: edited or damaged (its digest does not match)")
    if entry.get("key") != key or entry.get("parts") != parts:
        raise blobs.Refused(f"{path}: an entry of other inputs ("
                            + keys.changed_parts(entry.get("parts"), parts) + ")")
    files = entry.get("files")
    if not isinstance(files, dict) or sorted(files) != sorted(ROLES) or not isinstance(
            entry.get("data"), dict):
        raise blobs.Refused(f"{path}: expected files {list(ROLES)} and the export's data")
    return entry


def copy_out(cache: Path, entry: dict, dest: dict[str, str]) -> None:
    """Copies an entry's files to `dest` (role -> path), each written atomically and
    verified while it is copied (its sha256 and size): Refused at the first that is
    absent, a link, or other bytes, that file left as it was."""
    for role in ROLES:
        named = entry["files"][role]
        digest, size = str(named.get("sha256")), named.get("size")
        with atomic_writer(dest[role]) as out:
            blobs.read_verified(blobs.path_of(cache / "files", digest), digest, size, out)


def copy_in(key: str, parts: dict, dest: dict[str, str], log: str) -> dict | None:
    """The export of `key` copied from the cache into `dest` (role -> path): its data,
    with where it came from (cached_from, cached_made_in), the copy's own seconds
    (export_seconds) and the original export's (cached_export_seconds). None when there
    is no cache, no entry, or a refused one: each said in the log, but the first."""
    cache = cache_dir()
    if cache is None:
        return None
    t0 = time.monotonic()
    try:
        entry = read_entry(cache, key, parts)
    except blobs.Refused as exc:
        _say(log, key, f"not in the export cache {cache}" if exc.missing
             else f"the export cache's entry was refused: {exc}")
        return None
    except OSError as exc:
        _say(log, key, f"the export cache could not be read: {_reason(exc)}")
        return None
    try:
        copy_out(cache, entry, dest)
    except blobs.Refused as exc:
        _say(log, key, f"the export cache's entry was refused: {exc}")
        return None
    except (OSError, ConfigError) as exc:  # the suite's own file not writable: made anew
        _say(log, key, f"the export cache's files could not be copied: {_reason(exc)}")
        return None
    where = entry_path(cache, key)
    _say(log, key, f"copied from the export cache ({where}, made in {entry['made_in']})")
    return {**entry["data"], "cached_from": str(where), "cached_made_in": entry["made_in"],
            "cached_export_seconds": entry["data"].get("export_seconds"),
            "export_seconds": time.monotonic() - t0}


def keep(key: str, parts: dict, files: dict[str, dict], data: dict, log: str) -> None:
    """Stores a successful export in the cache, when there is one; a cache that cannot be
    written is said in the log, and the export stands."""
    cache = cache_dir()
    if cache is None:
        return
    try:
        where = store(cache, key, parts, files, data)
    except (OSError, ConfigError, blobs.Refused) as exc:
        _say(log, key, f"could not be stored in the export cache {cache}: {_reason(exc)}")
        return
    _say(log, key, f"stored in the export cache ({where})")


def _say(log: str, key: str, text: str) -> None:
    with open(log, "a", encoding="utf-8", errors="replace") as fh:
        fh.write(f"export {key}: {text}\n")


def _reason(exc: Exception) -> str:
    """An error in one line: `path: reason` for an OSError (not Python's `[Errno 20]`)."""
    if isinstance(exc, OSError) and exc.strerror and not isinstance(exc, WriteError):
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc)
