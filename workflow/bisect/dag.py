"""The commits of a bisection as a graph, and which of them need their case keyed.

`git rev-list --ancestry-path` lists the commits from good to bad as a line, but with
merges they are a graph: bisect/search.py walks it as `git bisect` does, and needs each
commit's parents. Keying a commit takes a process of its own (bisect/prepare.py: its
model files register its models), a quarter of a second or more; over a thousand
commits that was minutes before the first step. But a commit that changes none of the
files its parent's key read (the suite file and the model's sources) has its parent's
key, so it is given that key without a process: only the commits that touch those
files, and the ends, are prepared. What each commit changed comes from git in one
`git log` (and one `git diff-tree` per parent of a merge, which log does not diff).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workflow.bisect import revisions
from workflow.bisect.prepare import TREE

# At most one progress line this often while keying: a thousand commits are keyed in
# seconds to minutes, and a silent start reads as a hang.
PROGRESS_S = 5.0


@dataclass
class Graph:
    """`order`: the commits, good first, each after its parents (bad last); `parents`:
    each one's parents within the range; `changed`: (commit, parent) -> the paths that
    differ between them (no entry: not known, the commit is keyed)."""
    order: list[str]
    parents: dict[str, tuple[str, ...]]
    changed: dict[tuple[str, str], frozenset[str]]


def _git(repo: Path, *args: str) -> str:
    # Unstripped: a -z list's names may end in space.
    return revisions._git(repo, *args, strip=False)


def _names(listed: list[str]) -> frozenset[str]:
    """The paths of a -z name list (after a log header, the first starts a new line)."""
    if listed:
        listed = [listed[0].removeprefix("\n"), *listed[1:]]
    return frozenset(p for p in listed if p)


def graph(repo: Path, names: list[str]) -> Graph:
    """The graph of `names` (good first, bad last, as revisions.commits lists them)."""
    inside, good, bad = set(names), names[0], names[-1]
    out = _git(repo, "-c", "log.showSignature=false", "log", "--ancestry-path",
               "--no-renames", "--name-only", "-z", "--format=%x01%H %P", f"{good}..{bad}")
    parents: dict[str, tuple[str, ...]] = {good: ()}
    changed: dict[tuple[str, str], frozenset[str]] = {}
    merges = []
    for chunk in out.split("\x01")[1:]:
        head, *listed = chunk.split("\0")
        sha, *all_parents = head.split()
        if sha not in inside:
            continue
        parents[sha] = tuple(p for p in all_parents if p in inside)
        if len(all_parents) == 1:
            changed[(sha, all_parents[0])] = _names(listed)
        else:
            merges.append(sha)
    for sha in merges:  # log lists no paths for a merge: each side is diffed on its own
        for p in parents[sha]:
            changed[(sha, p)] = _names(_git(repo, "diff-tree", "-r", "--name-only",
                                            "--no-renames", "-z", p, sha).split("\0"))
    for i, name in enumerate(names):  # not in the log (none should be): keyed after the last
        parents.setdefault(name, (names[i - 1],))
    return Graph(topological(names, parents), parents, changed)


def topological(names: list[str], parents: dict[str, tuple[str, ...]]) -> list[str]:
    """`names` with every commit after its parents, otherwise in their order (rev-list's
    by date is not that where clocks disagree, and the search reads parents first)."""
    placed: set[str] = set()
    out, pending = [], list(names)
    while pending:
        rest = []
        for name in pending:
            if all(p in placed for p in parents.get(name, ())):
                out.append(name)
                placed.add(name)
            else:
                rest.append(name)
        if len(rest) == len(pending):  # parents outside `names`: cannot be, kept as given
            return out + rest
        pending = rest
    return out


def paths_read(prepared: dict, suite: str) -> frozenset[str] | None:
    """The repository's files a revision's key was made from: the suite file and every
    path of the revision's tree its parts name (the model's sources, model_modules).
    None where the revision could not be keyed: then what it read is not known, and a
    child that changes any file is keyed again."""
    if prepared.get("error") or prepared.get("failed") or "parts" not in prepared:
        return None
    found, todo = {suite}, [prepared["parts"]]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            todo += [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple):
            todo += item
        elif isinstance(item, str) and item.startswith(TREE + "/"):
            found.add(item.removeprefix(TREE + "/"))
    return frozenset(found)


def inherits(dag: Graph, name: str, read: dict[str, frozenset[str] | None]) -> str | None:
    """The parent whose key `name` has without being keyed: the first parent already
    keyed none of whose read files `name` changed (one that could not be keyed: whose
    tree `name` left as it was). None: `name` is keyed in a process of its own."""
    for parent in dag.parents.get(name, ()):
        changed = dag.changed.get((name, parent))
        if parent not in read or changed is None:
            continue
        paths = read[parent]
        if not (changed if paths is None else changed & paths):
            return parent
    return None


class Progress:
    """`keying 120 of 1000 revisions (4 prepared) ...` at most every PROGRESS_S seconds,
    a first line at once and a last one with the time it took."""

    def __init__(self, say: Callable[[str], None], total: int,
                 clock: Callable[[], float] = time.monotonic):
        self.say, self.total, self.clock = say, total, clock
        self.prepared, self.started = 0, clock()
        self.last = self.started
        self._line(f"keying {total} revisions ...")

    def _line(self, text: str) -> None:
        self.say(text)
        sys.stdout.flush()  # piped output is buffered: the line is for now, not the end

    def __call__(self, done: int) -> None:
        if self.clock() - self.last >= PROGRESS_S:
            self.last = self.clock()
            self._line(f"keying {done} of {self.total} revisions ({self.prepared} "
                       "prepared) ...")

    def done(self) -> None:
        self._line(f"keyed {self.total} revisions in {self.clock() - self.started:.1f} s: "
                   f"{self.prepared} prepared, {self.total - self.prepared} with their "
                   "parent's inputs")
