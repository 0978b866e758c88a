"""The commits a bisection walks and their trees: `git rev-list --ancestry-path` between
a good and a bad revision of the repository that holds what the suite measures, and
each commit's tree materialized once into the bisection's cache (`git archive`, read-only
on the user's repository: no worktree is registered in it, nothing of it changes)."""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from workflow.backends.proc import run_tool
from workflow.errors import ConfigError, StageError

GIT_TIMEOUT_S = 60


def _git(repo: Path, *args: str) -> str:
    return run_tool(["git", "-C", str(repo), *args], stage="bisect",
                    timeout=GIT_TIMEOUT_S).stdout.strip()


def repo_root(path: Path) -> Path:
    """The top of the git repository holding `path`; ConfigError when there is none."""
    try:
        return Path(_git(path if path.is_dir() else path.parent, "rev-parse",
                         "--show-toplevel"))
    except StageError:
        raise ConfigError([f"{path}: --repo: not in a git repository; expected the "
                           "repository that holds the suite and its model files"]) from None


def resolve(repo: Path, rev: str, flag: str) -> str:
    """The full sha of `rev`; ConfigError naming the flag when the repository has none."""
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except StageError:
        raise ConfigError([f"{repo}: {flag} {rev!r}: no such commit in the repository; "
                           "expected a sha, tag or branch that `git rev-parse` knows"]) from None


def commits(repo: Path, good: str, bad: str) -> list[str]:
    """good, then every commit on the ancestry path from good to bad, oldest first (bad
    last). ConfigError when good is not an ancestor of bad (nothing to bisect)."""
    g, b = resolve(repo, good, "--good"), resolve(repo, bad, "--bad")
    if g == b:
        raise ConfigError([f"{repo}: --good {good!r} and --bad {bad!r} are one commit "
                           f"({g[:12]}); expected two, good before bad"])
    try:
        _git(repo, "merge-base", "--is-ancestor", g, b)
    except StageError:
        raise ConfigError([f"{repo}: --good {good!r} is not an ancestor of --bad {bad!r}; "
                           "expected the good commit to come before the bad one"]) from None
    path = _git(repo, "rev-list", "--ancestry-path", "--reverse", f"{g}..{b}").split()
    return [g, *path]


def suite_in_repo(repo: Path, suite: Path) -> str:
    """The suite file's path inside the repository (as read at each revision)."""
    try:
        return str(suite.resolve().relative_to(repo.resolve()))
    except ValueError:
        raise ConfigError([f"{suite}: --configfile: not inside --repo {repo}; expected the "
                           "suite file of that repository (it is read at each "
                           "revision)"]) from None


def materialize(repo: Path, sha: str, cache: Path) -> Path:
    """The commit's tree under cache/<sha>/tree, extracted once (an interrupted extraction
    leaves no tree: it is written aside and renamed into place)."""
    tree = cache / sha / "tree"
    if tree.is_dir():
        return tree
    tree.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tree.parent) as tmp:
        tar = Path(tmp) / "tree.tar"
        _git(repo, "archive", "--format=tar", "-o", str(tar), sha)
        out = Path(tmp) / "tree"
        with tarfile.open(tar) as fh:
            # "data": no absolute paths, links out of the tree or device files.
            fh.extractall(out, filter="data")
        try:
            os.rename(out, tree)
        except OSError:
            if not tree.is_dir():
                raise
            shutil.rmtree(out, ignore_errors=True)  # another bisection made it meanwhile
    return tree
