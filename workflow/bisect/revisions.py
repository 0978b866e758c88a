"""The commits a bisection walks and their trees: `git rev-list --ancestry-path` between
a good and a bad revision of the repository that holds what the suite measures, and
each commit's tree materialized once into the bisection's cache.

A tree is the commit's tree as committed: read into a private index (GIT_INDEX_FILE in
the cache) and checked out from it into the cache, as `git checkout` writes files and
symlinks (a symlink stays one, wherever it points). Not `git archive`: it applies
`.gitattributes` export-ignore and export-subst, so a committed file marked export-ignore
would be missing. Read-only on the user's repository: its work tree, index and worktree
list are never touched."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from workflow.backends.proc import run_tool
from workflow.errors import ConfigError, StageError

GIT_TIMEOUT_S = 60
# cache/<sha>/ holds the commit's tree and the private index it was checked out from.
TREE, INDEX = "tree", "index"
# Settings of the user's repository that would make git read or write beyond the
# private index: a split index writes sharedindex files into .git, fsmonitor answers
# for the user's work tree, sparse checkout would leave files of the commit out.
PRIVATE = ("-c", "core.splitIndex=false", "-c", "core.fsmonitor=false",
           "-c", "core.sparseCheckout=false", "-c", "index.sparse=false",
           "-c", "core.untrackedCache=false")


def _git(repo: Path, *args: str, env: dict | None = None, strip: bool = True) -> str:
    """git's answer (`strip`: without surrounding white space, which a -z list's names
    may end in); ConfigError where git cannot be asked at all (not on PATH, or it
    refuses the repository for its owner), StageError for any other refusal (what
    that means is the caller's to say)."""
    try:
        out = run_tool(["git", "-C", str(repo), *args], stage="bisect",
                       timeout=GIT_TIMEOUT_S, env=env).stdout
        return out.strip() if strip else out
    except StageError as exc:
        if exc.message.startswith("could not start"):
            raise ConfigError([f"{repo}: git was not found on PATH; expected git installed "
                               "(bisect reads the repository's commits with it)"]) from None
        if "dubious ownership" in exc.message:
            raise ConfigError([f"{repo}: git refuses the repository: detected dubious "
                               "ownership (another user owns it); expected a repository git "
                               "trusts: git config --global --add safe.directory "
                               f"{repo.resolve()}"]) from None
        raise


def repo_root(path: Path) -> Path:
    """The top of the git repository holding `path`; ConfigError when there is none."""
    try:
        return Path(_git(path if path.is_dir() else path.parent, "rev-parse",
                         "--show-toplevel"))
    except StageError:
        raise ConfigError([f"{path}: --repo: not in a git repository; expected the "
                           "repository that holds the suite and its model files"]) from None


def _shallow(repo: Path) -> bool:
    try:
        return _git(repo, "rev-parse", "--is-shallow-repository") == "true"
    except StageError:
        return False


def _shallow_error(repo: Path, what: str) -> ConfigError:
    return ConfigError([f"{repo}: {what}: the repository is a shallow clone and its "
                        "history stops before it; expected the full history (git fetch "
                        "--unshallow)"])


def resolve(repo: Path, rev: str, flag: str) -> str:
    """The full sha of `rev`; ConfigError naming the flag when the repository has none
    (a shallow clone said as one: its commit may well exist upstream)."""
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except StageError:
        if _shallow(repo):
            raise _shallow_error(repo, f"{flag} {rev!r}") from None
        raise ConfigError([f"{repo}: {flag} {rev!r}: no such commit in the repository; "
                           "expected a sha, tag or branch that `git rev-parse` knows"]) from None


def commits(repo: Path, good: str, bad: str) -> list[str]:
    """good, then every commit on the ancestry path from good to bad, oldest first (bad
    last). ConfigError when good is not an ancestor of bad (nothing to bisect)."""
    g, b = resolve(repo, good, "--good"), resolve(repo, bad, "--bad")
    if g == b:
        raise ConfigError([f"{repo}: --good {good!r} and --bad {bad!r} are one commit "
                           f"({g[:12]}); expected two, good before bad"])
    require_ancestor(repo, g, b, f"--good {good!r} .. --bad {bad!r}",
                     f"{repo}: --good {good!r} is not an ancestor of --bad {bad!r}; "
                     "expected the good commit to come before the bad one")
    path = _git(repo, "rev-list", "--ancestry-path", "--reverse", f"{g}..{b}").split()
    return [g, *path]


def require_ancestor(repo: Path, older: str, newer: str, what: str, refusal: str) -> None:
    """ConfigError (`refusal`) unless commit `older` is an ancestor of `newer`; in a
    shallow clone, whose history may stop between them, one saying so (`what`: the
    flags' revisions)."""
    try:
        _git(repo, "merge-base", "--is-ancestor", older, newer)
    except StageError:
        if _shallow(repo):  # the path between them may run through what was cut
            raise _shallow_error(repo, what) from None
        raise ConfigError([refusal]) from None


def require_suite_at(repo: Path, rel: str, sha: str, flag: str, rev: str) -> None:
    """ConfigError unless the suite file `rel` is in commit `sha` (named `flag rev` on
    the command line): the suite is read from each revision's tree, and a file never
    committed there is the user's file missing from the revision, not a path in the
    cache they never named."""
    try:
        _git(repo, "cat-file", "-e", f"{sha}:{rel}")
    except StageError:
        raise ConfigError([f"{rel}: --configfile: not in the revision {flag} {rev!r} "
                           f"({sha[:12]}) of {repo}; expected the suite file committed "
                           "there (it is read at each revision): commit it, or name a "
                           "suite file the revision holds"]) from None


def merge_base(repo: Path, a: str, b: str, what: str, refusal: str) -> str:
    """The best common ancestor of commits a and b (`git merge-base`, what `git diff
    a...b` compares b against); ConfigError (`refusal`) when they have none, in a
    shallow clone one saying so (`what`: the flags' revisions)."""
    try:
        return _git(repo, "merge-base", a, b)
    except StageError:
        if _shallow(repo):  # the common history may be what was cut
            raise _shallow_error(repo, what) from None
        raise ConfigError([refusal]) from None


def dirty_files(repo: Path) -> list[str]:
    """The tracked files with uncommitted changes, as `git status --porcelain` lists
    them; --no-optional-locks: reading never takes the index lock or rewrites the
    user's index."""
    out = _git(repo, "--no-optional-locks", "status", "--porcelain", "--untracked-files=no",
               strip=False)
    return [line[3:] for line in out.splitlines() if line.strip()]


def suite_in_repo(repo: Path, suite: Path) -> str:
    """The suite file's path inside the repository (as read at each revision)."""
    try:
        return str(suite.resolve().relative_to(repo.resolve()))
    except ValueError:
        raise ConfigError([f"{suite}: --configfile: not inside --repo {repo}; expected the "
                           "suite file of that repository (it is read at each "
                           "revision)"]) from None


def _checkout(repo: Path, sha: str, unit: Path) -> None:
    """The commit's tree into unit/tree, from its private index unit/index (`-u`: the
    index records each file's stat as written, which `_intact` compares)."""
    env = {"GIT_INDEX_FILE": str(unit / INDEX)}
    _git(repo, *PRIVATE, "read-tree", sha, env=env)
    (unit / TREE).mkdir()
    _git(repo, *PRIVATE, f"--work-tree={unit / TREE}", "checkout-index", "--all", "--force",
         "-u", env=env)


def _intact(repo: Path, unit: Path) -> bool:
    """Whether unit/tree is still what its index says was checked out: no file changed,
    deleted or retyped since (`git diff-files`, which reads and never writes the index;
    a file whose stat changed is compared by content)."""
    if not (unit / INDEX).is_file() or not (unit / TREE).is_dir():
        return False  # never finished, or a tree of the git-archive days without index
    try:
        _git(repo, *PRIVATE, f"--work-tree={unit / TREE}", "diff-files", "--quiet",
             env={"GIT_INDEX_FILE": str(unit / INDEX)})
    except StageError:
        return False
    return True


@contextlib.contextmanager
def _locked(cache: Path, sha: str):
    """One process at a time checks and extracts a commit's tree: another bisection
    must not find a tree half-replaced, or remove one this process just verified."""
    locks = cache / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / sha, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def materialize(repo: Path, sha: str, cache: Path) -> Path:
    """The commit's tree under cache/<sha>/tree, extracted once and verified at each
    reuse: a tree changed since is extracted again. An interrupted extraction leaves no
    tree (it is written aside and renamed into place)."""
    unit = cache / sha
    with _locked(cache, sha):
        if _intact(repo, unit):
            return unit / TREE
        if unit.exists():  # damaged: moved aside first, so no half-removed tree is seen
            aside = cache / f".{sha[:12]}-damaged-{uuid.uuid4().hex[:8]}"
            os.rename(unit, aside)
            shutil.rmtree(aside, ignore_errors=True)
        with tempfile.TemporaryDirectory(dir=cache, prefix=f".{sha[:12]}-") as tmp:
            fresh = Path(tmp) / "unit"
            fresh.mkdir()
            _checkout(repo, sha, fresh)
            try:
                os.rename(fresh, unit)
            except OSError:
                # Where flock does not hold (some network file systems) another
                # bisection may have renamed its tree into place first: that one is used.
                if not (unit / TREE).is_dir():
                    raise
    return unit / TREE
