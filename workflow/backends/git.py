"""What git says of the code that made a result: its commit, `-dirty` when tracked files
differ from it, and the commit's date. Asked through proc.run_tool like every other
tool; records/ (below the backends) takes the answer from its caller."""

from __future__ import annotations

from pathlib import Path

from workflow.backends.proc import run_tool
from workflow.errors import StageError

TIMEOUT_S = 10


def _git(repo: str | Path, *args: str) -> str:
    return run_tool(["git", "-C", str(repo), *args], stage="provenance",
                    timeout=TIMEOUT_S).stdout.strip()


def git_sha(repo: str | Path = ".") -> str | None:
    """HEAD's sha of the repository at `repo` (`<sha>-dirty` when a tracked file changed);
    None outside a repository or without git."""
    try:
        sha = _git(repo, "rev-parse", "HEAD")
    except StageError:
        return None
    try:
        dirty = _git(repo, "status", "--porcelain", "--untracked-files=no")
    except StageError:
        dirty = ""  # a status git cannot give says nothing against the commit it named
    return sha + ("-dirty" if dirty else "")


def commit_date(repo: str | Path = ".") -> str | None:
    """HEAD's commit date (yy-mm-dd, as Forge's results record it); None where git
    cannot tell."""
    try:
        return _git(repo, "show", "-s", "--format=%cd", "--date=format:%y-%m-%d",
                    "HEAD") or None
    except StageError:
        return None


def head_facts(repo: str | Path = ".") -> dict[str, str]:
    """What history's run metadata takes from git when no CI names the run (issue 26):
    `sha` (as git_sha), `branch` (HEAD's branch, absent when detached) and `remote`
    (origin's URL); a key git cannot give is left out."""
    facts = {}
    sha = git_sha(repo)
    if sha is None:
        return facts  # not a repository: the other questions have no answer either
    facts["sha"] = sha
    for key, args in (("branch", ("symbolic-ref", "--short", "-q", "HEAD")),
                      ("remote", ("config", "--get", "remote.origin.url"))):
        try:
            value = _git(repo, *args)
        except StageError:
            continue  # detached HEAD, or no origin
        if value:
            facts[key] = value
    return facts
