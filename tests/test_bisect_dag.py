"""The commits of a bisection as a graph (workflow/bisect/dag.py) and their keying: each
commit's parents for the walk over merges, and a process only at the commits that
changed a file the case reads (the others inherit their parent's key). The pure parts
first; then git repositories made here (a fake prepare where the case's key is not the
point, the real one where it is)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import init_repo, write_suite
from tests.test_bisect import CASE, MODEL, suite
from workflow.bisect import dag
from workflow.bisect import run as bisecting
from workflow.bisect.prepare import TREE
from workflow.bisect.search import Step
from workflow.stats.enums import ABVerdict


def test_topological_puts_parents_first_and_keeps_the_order_otherwise():
    parents = {"g": (), "a": ("m",), "m": ("g",), "b": ("g",), "x": ("a", "b")}
    assert dag.topological(["g", "a", "m", "b", "x"], parents) == ["g", "m", "b", "a", "x"]
    assert dag.topological(["g", "m", "a"], parents) == ["g", "m", "a"]


def test_the_files_a_key_read_are_the_suite_and_the_trees_model_sources():
    prepared = {"key": "k", "parts": {"export": {
        "spec": {"model_modules": [f"{TREE}/models/m.py"]},
        "model sources": {f"{TREE}/models/m.py": "ab12", f"{TREE}/models/helper.py": "cd",
                          "workflow/models/common.py": "ef"}}}}
    assert dag.paths_read(prepared, "bench/suite.yaml") == {
        "bench/suite.yaml", "models/m.py", "models/helper.py"}
    assert dag.paths_read({"error": "no such case"}, "suite.yaml") is None
    assert dag.paths_read({"failed": {"stage": "prepare", "error": "x"}}, "s.yaml") is None


def test_a_commit_inherits_the_key_of_a_parent_whose_read_files_it_left_alone():
    graph = dag.Graph(["g", "a", "b", "x"], {"g": (), "a": ("g",), "b": ("g",), "x": ("a", "b")},
                      {("a", "g"): frozenset({"notes.txt"}), ("b", "g"): frozenset({"m.py"}),
                       ("x", "a"): frozenset({"m.py"}), ("x", "b"): frozenset({"notes.txt"})})
    read = {"g": frozenset({"suite.yaml", "m.py"})}
    assert dag.inherits(graph, "a", read) == "g"
    assert dag.inherits(graph, "b", read) is None
    read.update(a=read["g"], b=read["g"])
    assert dag.inherits(graph, "x", read) == "b"  # the merge took b's model as it was
    # A parent that could not be keyed read unknown files: only an unchanged tree inherits.
    assert dag.inherits(graph, "a", {"g": None}) is None
    graph.changed[("a", "g")] = frozenset()
    assert dag.inherits(graph, "a", {"g": None}) == "g"


def test_keying_says_how_far_it_got_at_most_every_few_seconds():
    lines, now = [], [0.0]
    progress = dag.Progress(lines.append, 1000, clock=lambda: now[0])
    for i in range(1000):
        now[0] = i * 0.01  # 10 s in all
        progress(i)
    progress.prepared = 7
    progress.done()
    assert lines[0] == "keying 1000 revisions ..."
    assert lines[1].startswith("keying 500 of 1000 revisions")
    assert len(lines) == 1 + 1 + 1 and "7 prepared, 993 with their parent's inputs" in lines[-1]


def git(repo: Path, *args: str, day: int = 0) -> str:
    # Commit dates set by hand: rev-list's order is by date, and a side branch dated
    # before the mainline commits is listed before them (as a real one often is).
    env = {**os.environ, "GIT_AUTHOR_DATE": f"2024-01-{day + 1:02d}T12:00:00",
           "GIT_COMMITTER_DATE": f"2024-01-{day + 1:02d}T12:00:00"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def commit(repo: Path, day: int, **files: str) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", f"day {day}", day=day)
    return git(repo, "rev-parse", "HEAD")


def model(width: int = 256, rows: str = "m", comment: str = "") -> str:
    return MODEL.format(width=width, rows=rows, comment=comment)


def merged_repo(repo: Path) -> dict[str, str]:
    """G; a side branch S1 (doubles the second layer: the regression) dated before the
    mainline's M1..M3 (each renames a local variable: a key of its own, the same speed)
    and N (another file only); X merges S1 into the mainline; B another file after it."""
    init_repo(repo)
    write_suite(repo / "suite.yaml", suite())
    shas = {"G": commit(repo, 0, **{"model.py": model()})}
    git(repo, "checkout", "-q", "-b", "side")
    shas["S1"] = commit(repo, 1, **{"model.py": model(width=512)})
    git(repo, "checkout", "-q", "main")
    for day, (name, rows) in enumerate([("M1", "n"), ("M2", "r"), ("M3", "q")], 2):
        shas[name] = commit(repo, day, **{"model.py": model(rows=rows)})
    shas["N"] = commit(repo, 5, **{"notes.txt": "unrelated\n"})
    git(repo, "merge", "-q", "--no-commit", "-s", "ours", "side", day=6)  # both, by hand
    (repo / "model.py").write_text(model(width=512, rows="q"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "merge", day=6)
    shas["X"] = git(repo, "rev-parse", "HEAD")
    shas["B"] = commit(repo, 7, **{"notes.txt": "again\n"})
    return shas


@pytest.mark.tool
def test_the_graph_of_a_merge_has_each_commits_parents_and_changes(tmp_path):
    shas = merged_repo(tmp_path / "repo")
    names = bisecting.git.commits(tmp_path / "repo", shas["G"], shas["B"])
    graph = dag.graph(tmp_path / "repo", names)
    by = {sha: name for name, sha in shas.items()}
    assert [by[s] for s in graph.order] == ["G", "S1", "M1", "M2", "M3", "N", "X", "B"]
    assert graph.parents[shas["X"]] == (shas["N"], shas["S1"])
    assert graph.changed[(shas["X"], shas["N"])] == {"model.py"}
    assert graph.changed[(shas["N"], shas["M3"])] == {"notes.txt"}
    assert graph.changed[(shas["B"], shas["X"])] == {"notes.txt"}


def fake_prepare(calls: list[str]):
    """bisect/run._prepare without a process: the key of the tree's suite and model
    files, as the real one's parts name them; a model with BROKEN in it cannot be
    keyed (as a syntax error cannot)."""
    def prepare(source, name, case, cache, build):
        calls.append(name)
        tree = source.tree(name)
        text = (tree / "model.py").read_text()
        if "BROKEN" in text:
            return {"error": f"model.py at {name[:12]}: invalid syntax"}
        key = str(hash(((tree / "suite.yaml").read_text(), text)))
        return {"key": key, "width": 512 if "WIDTH = 512" in text else 256,
                "ab": {"min_rounds": 8, "max_rounds": 64, "budget_s": 10},
                # A device this machine has (bisect refuses an absent one before building).
                "sku": {"iree": {"device": "local-sync"}},
                "parts": {"export": {"model sources": {f"{TREE}/model.py": key}}}}
    return prepare


@pytest.mark.tool
def test_a_bisection_over_a_merge_names_the_side_branchs_commit(tmp_path, monkeypatch):
    # The whole walk through run.run on the repository's real graph, the steps faked
    # (slower where the model's second layer is 512 wide and the base's is not).
    shas = merged_repo(tmp_path / "repo")
    calls, measured = [], []
    monkeypatch.setattr(bisecting, "_prepare", fake_prepare(calls))

    def measure_pair(names, sides, *, scale, log, final=False):
        measured.append(names)
        slow = sides[1]["width"] > sides[0]["width"]
        return Step(*names, ABVerdict.REGRESSION if slow else ABVerdict.NO_DIFFERENCE,
                    2.0 if slow else 1.0, [1.9, 2.1], 64, {})
    monkeypatch.setattr(bisecting, "measure_pair", measure_pair)
    source = bisecting.commit_source(None, tmp_path / "repo" / "suite.yaml", shas["G"],
                                     shas["B"], tmp_path / "cache")
    lines = []
    result = bisecting.run(source, CASE, tmp_path / "cache", say=lines.append)
    assert (result["first_bad"], result["last_good"]) == (shas["S1"], shas["G"])
    # The walk's steps: the ends, M2 (good), S1 (bad: its step is the final pair).
    assert measured == [(shas["G"], shas["X"]), (shas["G"], shas["M2"]),
                        (shas["G"], shas["S1"])]
    # N changed another file only: keyed without a process (the ends always are).
    keyed = [shas[n] for n in ("G", "S1", "M1", "M2", "M3", "X", "B")]
    assert calls[:7] == keyed and shas["N"] not in calls
    assert lines[0] == "keying 8 revisions ..." and "7 prepared, 1 with" in lines[1]


@pytest.mark.tool
def test_keying_prepares_only_the_commits_that_changed_what_the_case_reads(tmp_path,
                                                                           monkeypatch):
    repo = tmp_path / "repo"
    init_repo(repo)
    write_suite(repo / "suite.yaml", suite())
    # 20 breaks the model, 21 puts it back as it was.
    plan = {10: model(width=512), 20: model(width=512) + "BROKEN\n", 21: model(width=512),
            30: model(width=1024)}
    shas = [commit(repo, 0, **{"model.py": model()})]
    for i in range(1, 40):
        files = {"model.py": plan[i]} if i in plan else {"notes.txt": f"{i}\n"}
        shas.append(commit(repo, 0, **files))
    calls = []
    monkeypatch.setattr(bisecting, "_prepare", fake_prepare(calls))
    source = bisecting.commit_source(None, repo / "suite.yaml", shas[0], shas[-1],
                                     tmp_path / "cache")
    revisions, ab = bisecting.keyed(source, CASE, tmp_path / "cache")
    # The ends, the model's changes, and the fix after the broken one (what a revision
    # that could not be keyed read is not known: any change is keyed again): 6 of 40.
    assert sorted(calls) == sorted({shas[i] for i in (0, 10, 20, 21, 30, 39)}), \
        [shas.index(c) for c in calls]
    full = fake_prepare([])
    expected = [full(source, s, CASE, None, False).get("key") or f"? {s}" for s in shas]
    assert [r.key for r in revisions] == expected
    assert revisions[20].broken.startswith("could not be keyed (model.py at")
    assert revisions[21].broken is None and ab["max_rounds"] == 64
    assert [r.parents for r in revisions[1:3]] == [(shas[0],), (shas[1],)]


@pytest.mark.tool
def test_real_keys_of_commits_not_prepared_equal_their_own(tmp_path):
    """The real prepare (a process per keyed commit, no build): every key inherited is
    the key the commit has, and a model that ends its process at import, or a suite
    without the case, is a revision that could not be keyed, not a stop."""
    repo = tmp_path / "repo"
    init_repo(repo)
    write_suite(repo / "suite.yaml", suite())
    dropped = {**suite(), "workloads": [{"model": "widening", "shapes": [[32, 256]]}]}
    steps = [{"model.py": model()}, {"notes.txt": "1"}, {"model.py": model(rows="n")},
             {"model.py": "import os\nos._exit(3)\n"}, {"model.py": model(width=512)},
             {"suite.yaml": json.dumps(dropped)}, {"suite.yaml": json.dumps(suite())},
             {"notes.txt": "2"}, {"model.py": model(width=512, comment="# why")}]
    shas = [commit(repo, 0, **files) for files in steps]
    cache = tmp_path / "cache"
    source = bisecting.commit_source(None, repo / "suite.yaml", shas[0], shas[-1], cache)
    revisions, _ = bisecting.keyed(source, CASE, cache)
    own = [bisecting._prepare(source, s, CASE, cache, build=False) for s in shas]
    assert [r.key for r in revisions] == [p.get("key") or f"? {s}"
                                          for p, s in zip(own, shas, strict=True)]
    assert revisions[1].key == revisions[0].key and revisions[7].key == revisions[6].key
    assert "could not be keyed" in revisions[3].broken
    assert "not in the suite at this revision" in revisions[5].broken
    assert revisions[4].broken is None and revisions[6].key == revisions[4].key
    assert revisions[8].key == revisions[6].key  # a comment: the same inputs


def test_a_revisions_model_sources_are_named_by_their_path_in_the_repository(tmp_path):
    """The explanation of a step or an A/B row prints the model sources that changed:
    `model source model.py: ab12 -> cd34`, not the key's placeholder for the revision's
    tree (`<revision>/model.py`)."""
    from workflow.bisect.prepare import case_key, suite_keys

    tree = tmp_path / "tree"
    tree.mkdir()
    write_suite(tree / "suite.yaml", {**suite(), "backends": ["iree", "torch-eager"]})
    (tree / "model.py").write_text(MODEL.format(width=512, comment="", rows="m"))
    prepared = case_key(tree, "suite.yaml", CASE, {}, "rev")
    assert "model.py" in prepared["model_sources"]
    assert not any(TREE in path for path in prepared["model_sources"])
    assert any(TREE in path for path in prepared["parts"]["export"]["model sources"])
    torch = suite_keys(tree, "suite.yaml", "rev")["cases"][CASE.replace("iree", "torch-eager")]
    assert "model.py" in torch["torch_side"]["model_sources"]
    assert not any(TREE in path for path in torch["torch_side"]["model_sources"])
