"""The revisions `benchflow bisect` walks and what it leaves of the user's directories:
each commit's tree as committed (export attributes not applied, symlinks kept as
symlinks), extracted into the cache without touching the user's work tree, index or
worktrees, verified before reuse; git's refusals said in words (a shallow clone, git
missing, dubious ownership); the default cache outside the working directory; the
steps kept only in the suite's own store, and a --store that is no store refused before
anything is measured. Small git repositories built here; nothing is measured."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import init_repo, write_suite
from workflow.bisect import revisions
from workflow.cli.main import main
from workflow.errors import ConfigError

pytestmark = [pytest.mark.tool]

CASE = "sync/iree/widening-64x256-f32/baseline"
ROOT = Path(__file__).resolve().parents[1]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(repo: Path, commits: list[dict[str, str]]) -> list[str]:
    """A repository whose commit i writes commits[i] ({path: text}; text "-> TARGET" is
    a symlink to TARGET), a suite.yaml in the first. The shas, oldest first."""
    init_repo(repo)
    write_suite(repo / "suite.yaml", {"suite_name": "bisect"})
    shas = []
    for files in commits:
        for name, text in files.items():
            path = repo / name
            if text.startswith("-> "):
                path.symlink_to(text[3:])
            else:
                path.write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--no-gpg-sign", "-m", f"commit {len(shas) + 1}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas


AS_COMMITTED = {".gitattributes": "model.py export-ignore\nversion.txt export-subst\n",
                "model.py": "WIDTH = 256\n", "version.txt": "$Format:%H$\n",
                "absolute": "-> /etc/hostname", "outside": "-> ../../elsewhere/model.py"}


def user_state(repo: Path) -> tuple:
    """What bisect must leave as it was: the work tree's status, the index's bytes, the
    worktree list."""
    index = hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest()
    return (git(repo, "status", "--porcelain", "--ignored"), index,
            git(repo, "worktree", "list", "--porcelain"))


def test_a_tree_is_the_commit_as_committed_and_the_repository_is_untouched(tmp_path):
    repo = tmp_path / "repo"
    (sha,) = make_repo(repo, [AS_COMMITTED])
    before = user_state(repo)
    tree = revisions.materialize(repo, sha, tmp_path / "cache")
    # export-ignore and export-subst are git archive's: the files are as committed.
    assert (tree / "model.py").read_text() == "WIDTH = 256\n"
    assert (tree / "version.txt").read_text() == "$Format:%H$\n"
    # Symlinks as committed, wherever they point: not followed, not refused.
    assert (tree / "absolute").is_symlink()
    assert os.readlink(tree / "absolute") == "/etc/hostname"
    assert os.readlink(tree / "outside") == "../../elsewhere/model.py"
    assert user_state(repo) == before
    assert revisions.materialize(repo, sha, tmp_path / "cache") == tree  # reused


def test_two_processes_extracting_one_commit_at_once_share_one_tree(tmp_path):
    repo = tmp_path / "repo"
    (sha,) = make_repo(repo, [AS_COMMITTED])
    script = ("import sys; from pathlib import Path; from workflow.bisect import revisions; "
              "print(revisions.materialize(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])))")
    argv = [sys.executable, "-c", script, str(repo), sha, str(tmp_path / "cache")]
    procs = [subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    trees = {out.strip() for out, _ in outs}
    assert trees == {str(tmp_path / "cache" / sha / "tree")}, outs
    assert (tmp_path / "cache" / sha / "tree" / "model.py").read_text() == "WIDTH = 256\n"
    # Nothing of the losers' extractions is left beside the tree.
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [".locks", sha]


def test_a_damaged_cached_tree_is_extracted_again(tmp_path):
    repo = tmp_path / "repo"
    (sha,) = make_repo(repo, [{"model.py": "WIDTH = 256\n", "helper.py": "X = 1\n"}])
    cache = tmp_path / "cache"
    tree = revisions.materialize(repo, sha, cache)
    (tree / "model.py").write_text("WIDTH = 512\n")  # same size: content, not stat
    (tree / "helper.py").unlink()
    again = revisions.materialize(repo, sha, cache)
    assert (again / "model.py").read_text() == "WIDTH = 256\n"
    assert (again / "helper.py").read_text() == "X = 1\n"
    # A tree of the git-archive days (no index beside it) cannot be verified: redone.
    (cache / sha / revisions.INDEX).unlink()
    (again / "model.py").write_text("stale\n")
    assert (revisions.materialize(repo, sha, cache) / "model.py").read_text() == "WIDTH = 256\n"


def bisect_cli(capsys, repo: Path, good: str, bad: str, *extra: str) -> tuple[int, list[str]]:
    code = main(["bisect", CASE, "--good", good, "--bad", bad, "--configfile",
                 str(repo / "suite.yaml"), *extra])
    return code, capsys.readouterr().err.strip().splitlines()


def test_a_shallow_clone_is_said_to_be_shallow(tmp_path, capsys):
    shas = make_repo(tmp_path / "repo", [{"a.txt": f"{i}\n"} for i in range(4)])
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{tmp_path / 'repo'}",
                    str(clone)], check=True, capture_output=True)
    code, err = bisect_cli(capsys, clone, shas[0], shas[-1], "--cache", str(tmp_path / "c"))
    assert code == 2 and len(err) == 1, err
    assert "shallow clone" in err[0] and "git fetch --unshallow" in err[0], err
    assert "no such commit" not in err[0]


def test_git_missing_from_path_is_said(tmp_path, capsys, monkeypatch):
    shas = make_repo(tmp_path / "repo", [{"a.txt": "1\n"}, {"a.txt": "2\n"}])
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, err = bisect_cli(capsys, tmp_path / "repo", shas[0], shas[-1],
                           "--cache", str(tmp_path / "c"))
    assert code == 2 and len(err) == 1, err
    assert "git was not found on PATH" in err[0] and "not in a git repository" not in err[0]


def test_a_repository_of_dubious_ownership_names_safe_directory(tmp_path, capsys, monkeypatch):
    repo = tmp_path / "repo"
    shas = make_repo(repo, [{"a.txt": "1\n"}, {"a.txt": "2\n"}])
    # git's own switch for its ownership check (its test suite's): another owner.
    monkeypatch.setenv("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1")
    code, err = bisect_cli(capsys, repo, shas[0], shas[-1], "--cache", str(tmp_path / "c"))
    assert code == 2 and len(err) == 1, err
    assert "dubious ownership" in err[0], err
    assert f"git config --global --add safe.directory {repo.resolve()}" in err[0], err


def test_the_default_cache_is_the_users_not_the_working_tree(tmp_path, capsys, monkeypatch):
    from workflow.bisect import run as bisecting

    repo = tmp_path / "repo"
    shas = make_repo(repo, [{"a.txt": "1\n"}, {"a.txt": "2\n"}])
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path / "user-cache"))
    monkeypatch.chdir(repo)  # the usual place to run it: the repository bisected
    seen = {}

    def extract_then_stop(source, case, cache, **kw):
        seen["cache"] = cache
        seen["tree"] = source.tree(source.names[0])
        raise ConfigError(["stopped before measuring"])

    monkeypatch.setattr(bisecting, "run", extract_then_stop)
    code, err = bisect_cli(capsys, repo, shas[0], shas[-1])
    assert code == 2 and err == ["stopped before measuring"], err
    assert seen["cache"] == (tmp_path / "user-cache" / "bisect").resolve()
    assert seen["tree"].is_relative_to(seen["cache"]) and seen["tree"].is_dir()
    assert git(repo, "status", "--porcelain", "--ignored") == ""


@pytest.mark.parametrize("kind", ["a regular file", "a directory of other files"])
def test_a_store_that_is_no_store_is_refused_before_measuring(tmp_path, capsys, monkeypatch,
                                                             kind):
    from workflow.bisect import run as bisecting

    shas = make_repo(tmp_path / "repo", [{"a.txt": "1\n"}, {"a.txt": "2\n"}])
    store = tmp_path / "store"
    if kind == "a regular file":
        store.write_text("not a store\n")
    else:
        store.mkdir()
        (store / "notes.txt").write_text("mine\n")
    monkeypatch.setattr(bisecting, "run", lambda *a, **k: pytest.fail("measured"))
    code, err = bisect_cli(capsys, tmp_path / "repo", shas[0], shas[-1], "--store", str(store),
                           "--cache", str(tmp_path / "c"))
    assert code == 2 and len(err) == 1, err
    assert "not a benchflow history store" in err[0], err


def kept_without_store(tmp_path: Path, cwd: Path, suite: Path) -> dict:
    """bisect/history.keep of two measured steps, without --store, run from `cwd`."""
    from tests.test_bisect import side_steps
    from workflow.bisect.history import keep, store_settings
    from workflow.bisect.run import Source

    shas = [c * 40 for c in "abc"]
    steps, built = side_steps(shas)
    source = Source("commit", "repo", "suite.yaml", shas, tree=lambda sha: tmp_path,
                    suite_dir=suite.parent)
    os.chdir(cwd)
    return keep(steps, built, source, store_settings(suite), None, tmp_path / "reports")


def test_without_store_another_suites_history_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    suite = write_suite((tmp_path / "mine").mkdir() or tmp_path / "mine" / "suite.yaml",
                        {"suite_name": "mine"})
    other = tmp_path / "other"
    (other / "history").mkdir(parents=True)  # the other suite's default store
    kept = kept_without_store(tmp_path, other, suite)
    assert "is not this suite's store" in kept["skipped"], kept
    assert list((other / "history").iterdir()) == []


def test_without_store_the_suites_own_history_gets_the_steps(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "mine"
    (mine / "history").mkdir(parents=True)
    suite = write_suite(mine / "suite.yaml", {"suite_name": "mine"})
    kept = kept_without_store(tmp_path, mine, suite)
    assert kept.get("runs") == 4 and len(kept["ingested"]) == 4, kept
