"""A suite's `goldens.dir` judged before any job: a path that is no directory, or one
not made yet whose close-named sibling holds golden files (a misspelling, which would
measure every case and then find no golden)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workflow.files import directory_problem


def goldens_dir_problems(raw: Any, source: str, default: str) -> list[str]:
    """`goldens.dir` (or its default) that exists and is no directory: the run would
    measure the whole suite and then fail reading goldens from it, so it is refused
    with the suite's other problems. Relative to the working directory, as the run reads
    it; a folder not there yet is fine (`benchflow bless` makes it). A value of the wrong
    type is the schema's."""
    goldens = raw.get("goldens", {}) if isinstance(raw, dict) else None
    if not isinstance(goldens, dict):
        return []
    directory = goldens.get("dir", default)
    if not isinstance(directory, str) or not directory:
        return []
    problem = directory_problem(directory)
    shown = directory if directory.isprintable() else repr(directory)
    if problem is None:
        near = _misspelt_goldens_dir(Path(directory))
        if near is None:
            return []
        where = "" if Path(directory).is_absolute() else f" (from {Path.cwd()})"
        return [f"{source}: goldens.dir: {shown}: no such directory{where}; did you mean "
                f"{str(near)!r}, which holds golden files? (a misspelt name would measure "
                "every case and then fail the gate: none has a golden); to start a new set "
                "of goldens under this name, make the directory first"]
    return [f"{source}: goldens.dir: {shown} {problem}; expected a directory of golden "
            "files, or none yet (`benchflow bless` makes it)"]


def _misspelt_goldens_dir(path: Path) -> Path | None:
    """For a goldens.dir that does not exist: the directory the user meant, a path whose
    first missing part is replaced by a close name beside it (difflib's ratio 0.8) and
    that holds JSON files (`golden` for `goldens`, `golden/ci` for `goldens/ci`). None
    when there is none: a goldens.dir not made yet is a first run's, before any bless."""
    import difflib

    parts = path.parts
    missing = next((i for i in range(len(parts)) if not Path(*parts[:i + 1]).exists()), None)
    if missing is None:
        return None
    parent = Path(*parts[:missing]) if missing else Path(".")
    try:
        siblings = [p.name for p in parent.iterdir() if p.is_dir()]
    except OSError:
        return None
    # goldens2 or goldens-ci beside goldens starts a new set: no misspelling of it.
    siblings = [n for n in siblings if not parts[missing].startswith(n)]
    for name in difflib.get_close_matches(parts[missing], siblings, n=3, cutoff=0.8):
        near = parent / name / Path(*parts[missing + 1:]) if missing + 1 < len(parts) \
            else parent / name
        try:
            if near.is_dir() and any(f.suffix == ".json" for f in near.iterdir()):
                return near
        except OSError:
            continue
    return None
