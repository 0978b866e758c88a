"""`benchflow bisect` end to end (issue 38, "Done when"): a git repository built here, 16
commits of a user model (model_modules) and its suite, bisected by paired A/B steps of
real IREE modules. Bad input (no repository, an unknown revision, good after bad, a case
not in the suite) is refused in one line with exit 2 before anything is measured."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FAST_MEASUREMENT, write_suite
from workflow.bisect.measure import FINAL_ROUNDS
from workflow.cli.bisect import text_lines
from workflow.cli.main import main

pytestmark = [pytest.mark.tool]

MODEL = '''
from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model

WIDTH = {width}
{comment}

@benchmark_model(default_shape=(64, 256), shape_doc="[rows, width]")
def widening(config, dtype, layers, shape):
    """Linear(K, K), ReLU, Linear(K, WIDTH)."""
    import torch

    {rows}, k = shape
    gen = seeded()
    module = torch.nn.Sequential(torch.nn.Linear(k, k, bias=False), torch.nn.ReLU(),
                                 torch.nn.Linear(k, WIDTH, bias=False))
    return finish(module, (torch.randn({rows}, k, generator=gen),), dtype)
'''
CASE = "sync/iree/widening-64x256-f32/baseline"


def suite() -> dict:
    # Single-threaded local-sync (the SKU the README recommends for A/B), a 5 % margin
    # and up to 160 rounds: what a loaded 2-core machine resolves (tests/test_ab.py).
    return {"suite_name": "bisect",
            "skus": {"sync": {"iree": {"target_cpu": "host", "device": "local-sync"},
                              "measurement": {**FAST_MEASUREMENT, "min_time_s": 0.02}}},
            "workloads": [{"model": "widening", "shapes": [[64, 256]]}],
            "model_modules": ["model.py"],
            "ab": {"margin": 0.05, "max_rounds": 160, "budget_s": 120}}


def git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def build_repo(repo, commits: dict[int, dict], n: int = 16, ab: dict | None = None,
               skus: dict | None = None) -> list[str]:
    """n commits; commits[i] says what commit i (1-based) writes: model settings
    (width, rows: the local variable's name, comment) or an unrelated file; `ab`: the
    suite's A/B settings instead of suite()'s; `skus`: more SKUs. Returns the shas,
    oldest first."""
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    model = {"width": 256, "rows": "m", "comment": ""}
    settings = suite()
    settings["skus"].update(skus or {})
    write_suite(repo / "suite.yaml", {**settings, **({"ab": ab} if ab else {})})
    shas = []
    for i in range(1, n + 1):
        change = commits.get(i, {"notes": f"unrelated change {i}\n"})
        if "notes" in change:
            (repo / "notes.txt").write_text(change["notes"])
        model.update({k: v for k, v in change.items() if k != "notes"})
        (repo / "model.py").write_text(MODEL.format(**model))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return shas


def bisected(capsys, repo, shas, *extra) -> tuple[int, dict]:
    code = main(["bisect", CASE, "--good", shas[0], "--bad", shas[-1], "--configfile",
                 str(repo / "suite.yaml"), "--cache", str(repo.parent / "cache"),
                 "--format", "json", *extra])
    captured = capsys.readouterr()
    assert captured.out, (code, captured.err)
    return code, json.loads(captured.out)


@pytest.mark.e2e
def test_the_commit_that_doubles_a_layer_is_named(tmp_path, capsys):
    shas = build_repo(tmp_path / "repo", {
        3: {"rows": "n"},              # a renamed local variable: the digest changes
        4: {"comment": "# a comment"},  # a comment: the same syntax tree, skipped
        11: {"width": 512},            # the regression
        13: {"rows": "r"}})
    store = tmp_path / "store"
    code, result = bisected(capsys, tmp_path / "repo", shas, "--store", str(store))
    print(json.dumps(result["steps"], indent=1))
    assert code == 1, result["summary"]
    assert result["first_bad"] == shas[10] and result["last_good"] == shas[2]
    assert result["measured"] <= 5
    skipped = {s["revision"]: s["why"] for s in result["steps"] if s["kind"] == "skipped"}
    assert skipped[shas[3]] == f"same inputs as {shas[2]}"  # the comment-only commit
    assert skipped[shas[1]] == f"same inputs as {shas[0]}"  # an unrelated file
    assert len(skipped) == 16 - 4
    final = result["final"]
    assert final["verdict"] == "regression" and final["ratio"] > 1.2
    # The final pair is measured to its rounds, not only until its verdict.
    assert final["rounds"] >= min(FINAL_ROUNDS, suite()["ab"]["max_rounds"])
    top = final["attribution"]["attribution"]["rows"][0]
    assert "matmul" in top["name"] and "512" in top["name"], top
    assert "model source" in final["attribution"]["what_changed"]
    # The text form of the same result names it, and the commits skipped by content.
    text = "\n".join(text_lines(result, lambda sha: sha[:12]))
    print(text)
    assert f"FAIL: first bad revision: {shas[10][:12]} (" in text and "explains" in text
    # Commits 4 (the comment) to 10 in one line: the JSON above lists each one.
    assert (f"skipped 7 revisions {shas[3][:12]}..{shas[9][:12]}: same inputs as "
            f"{shas[2][:12]}") in text
    # Each measured side is a run of the history under its commit.
    assert result["history"]["runs"] == 2 * result["measured"], result["history"]
    capsys.readouterr()
    assert main(["history", "show", CASE, "--store", str(store), "--format", "json"]) == 0
    held = {p["head_sha"] for s in json.loads(capsys.readouterr().out) for p in s["points"]}
    assert {shas[0], shas[10]} <= held and held <= set(shas)


@pytest.mark.e2e
@pytest.mark.quiet
def test_an_unmeasurable_change_is_no_bad_commit(tmp_path, capsys):
    # An A/A verdict at a 5 % margin: quiet, as tests/test_ab.py's A/A pair (under the
    # parallel tier's load it would be inconclusive, and exit 3). Paid on every CI run:
    # 6 commits (each is keyed in a process of its own), and 30 s of rounds at most (a
    # quiet machine decides in a few seconds; 160 rounds bound it as suite() does).
    shas = build_repo(tmp_path / "repo", {2: {"rows": "n"}, 4: {"comment": "# a comment"}},
                      n=6, ab={"margin": 0.05, "max_rounds": 160, "budget_s": 30})
    code, result = bisected(capsys, tmp_path / "repo", shas)
    assert code == 0, result["summary"]
    assert result["first_bad"] is None and result["measured"] == 1
    assert result["summary"].startswith("no bad revision") and result["groups"] == 2
    assert [s["kind"] for s in result["steps"]] == ["ends"] + ["skipped"] * 4



def fake_releases(monkeypatch, tmp_path) -> Path:
    """Three releases of iree-base-compiler without the network: 1.0 and 1.1 are the
    project's own iree-compile (one build: 1.1 is skipped by content), 1.2 a wrapper
    around it that adds a codegen flag and logs each call (another build: measured).
    Returns the wrapper's log."""
    from workflow.backends import packages

    compiler = Path(sys.executable).parent / "iree-compile"
    log = tmp_path / "wrapper.log"
    wrapper = tmp_path / "iree-1.2" / "iree-compile"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\n'
                       f'exec "{compiler}" "$@" --iree-llvmcpu-disable-vector-peeling\n')
    wrapper.chmod(0o755)
    tools = {"1.0": compiler, "1.1": compiler, "1.2": wrapper}

    def environment(package, version, cache):
        assert package == "iree-base-compiler"
        # Each release timed with its own runtime (packages.COMPANIONS): here the
        # project's, which runs what every one of these compilers makes.
        runtime = Path(sys.executable).parent / "iree-benchmark-module"
        return packages.PackageEnv(package, version, tools[version].parent,
                                   Path(sys.executable), {"iree-compile": tools[version],
                                                          "iree-benchmark-module": runtime})

    monkeypatch.setattr(packages, "releases", lambda package, good, bad: list(tools))
    monkeypatch.setattr(packages, "environment", environment)
    return log


def test_a_package_bisection_measures_each_release_with_its_own_compiler(
        tmp_path, monkeypatch, capsys):
    log = fake_releases(monkeypatch, tmp_path)
    home = tmp_path / "suite"
    home.mkdir()
    (home / "model.py").write_text(MODEL.format(width=256, rows="m", comment=""))
    # Short budgets: the wiring is what is checked here, not a verdict.
    write_suite(home / "suite.yaml", {**suite(), "ab": {"margin": 0.05, "max_rounds": 16,
                                                         "budget_s": 5}})
    code = main(["bisect", CASE, "--package", "iree-base-compiler", "--good", "1.0",
                 "--bad", "1.2", "--configfile", str(home / "suite.yaml"),
                 "--cache", str(tmp_path / "cache"), "--format", "json"])
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert code in (0, 1, 3), captured.err
    assert result["kind"] == "release" and result["revisions"] == ["1.0", "1.1", "1.2"]
    assert result["groups"] == 2
    skipped = [s for s in result["steps"] if s["kind"] == "skipped"]
    assert [(s["revision"], s["same_as"]) for s in skipped] == [("1.1", "1.0")]
    ends = result["steps"][0]
    assert (ends["kind"], ends["revision"], ends["against"]) == ("ends", "1.2", "1.0")
    assert ends["verdict"] != "failed" and ends["rounds"] > 0, ends
    # 1.2 was compiled by its own compiler, once, into the build of its own content key
    # (the tools among it); 1.0 by the project's, into another.
    calls = [c for c in log.read_text().splitlines() if "module.mlirbc" in c]
    assert len(calls) == 1 and "/builds/" in calls[0], calls


CASES = [
    ("bisect-not-a-repo", "--configfile in a directory that is no git repository",
     "not in a git repository"),
    ("bisect-unknown-rev", "--good names no commit", "--good 'nosuchrev': no such commit"),
    ("bisect-good-after-bad", "--good is a later commit than --bad",
     "is not an ancestor of --bad"),
    ("bisect-unknown-case", "a case id the suite does not have",
     "case 'sync/iree/nosuch/baseline': not in the suite at this revision"),
    ("bisect-unknown-package", "--package names a package bisect cannot measure",
     "--package 'numpy': bisect measures IREE cases"),
    ("bisect-bad-history", "the suite's history section (where the steps are kept) has "
     "an unknown key", "history: unknown key(s) ['paht']"),
    ("bisect-cache-file", "--cache names a regular file (a traceback, NotADirectoryError "
     "on its .locks, once keying began)", "is a regular file, not a directory; expected "
     "a directory (the revisions' trees and builds are kept in it)"),
    ("bisect-suite-uncommitted", "--configfile names a suite file never committed "
     "(`<cache>/<sha>/tree/mine.yaml: file not found` before: a path the user never "
     "named)", "--configfile: not in the revision --good"),
    ("ab-cache-file", "`ab --base --new` with --cache a regular file, as bisect's",
     "is a regular file, not a directory; expected a directory"),
    ("ab-suite-uncommitted", "`ab --base --new --configfile` a suite file never "
     "committed, as bisect's", "--configfile: not in the revision --base"),
    ("bisect-device-absent", "a CUDA case bisected on a machine without CUDA (both ends "
     "were built, tried twice, then not judged)", "no cuda device here"),
]
# Refused in one line with exit 2 (the test below); the rows after them are checked by
# their own tests, by id (WHY).
REFUSED = list(CASES)
CASES += [
    ("bisect-model-exits", "a commit whose model calls os._exit(0) at import: the keying "
     "process exits 0 without its answer (a FileNotFoundError traceback before); the "
     "commit is skipped as a broken one",
     "could not be keyed (prepare failed: the revision's process exited 0 without its "
     "answer"),
]
WHY = {row[0]: row[-1] for row in CASES}


@pytest.fixture(scope="module")
def refused_repo(tmp_path_factory) -> tuple[Path, list[str]]:
    """The repository the refusals below are given (16 commits, a CUDA SKU besides),
    built once for them all: some fifty git processes each time otherwise. Each test
    refuses on a copy of its own, as some write into the working copy."""
    repo = tmp_path_factory.mktemp("refused") / "repo"
    shas = build_repo(repo, {}, skus={"gpu": {"iree": {
        "target_backend": "cuda", "target_chip": "sm_80", "device": "cuda"}}})
    return repo, shas[:3]


@pytest.mark.parametrize("cid,desc,expected", REFUSED, ids=[c[0] for c in REFUSED])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, refused_repo, cid, desc,
                                          expected):
    repo = tmp_path / "repo"
    if cid == "bisect-not-a-repo":
        repo.mkdir()
        write_suite(repo / "suite.yaml", suite())
        shas = ["HEAD", "HEAD~1"]
    else:
        shutil.copytree(refused_repo[0], repo, symlinks=True)
        shas = refused_repo[1]
    if cid == "bisect-bad-history":  # the working copy's suite: read before measuring
        write_suite(repo / "suite.yaml", {**suite(), "history": {"paht": "h"}})
    case = {"bisect-unknown-case": "sync/iree/nosuch/baseline",
            "bisect-device-absent": CASE.replace("sync/", "gpu/")}.get(cid, CASE)
    good, bad = {"bisect-unknown-rev": ("nosuchrev", shas[-1]),
                 "bisect-good-after-bad": (shas[-1], shas[0])}.get(cid, (shas[0], shas[-1]))
    extra = ["--package", "numpy"] if cid == "bisect-unknown-package" else []
    suite_file, cache = repo / "suite.yaml", tmp_path / "cache"
    if cid.endswith("-suite-uncommitted"):
        suite_file = repo / "mine.yaml"
        write_suite(suite_file, suite())
    if cid.endswith("-cache-file"):
        cache.write_text("not a directory\n")
    if cid.startswith("ab-"):
        argv = ["ab", "--base", good, "--new", bad, "--output", str(tmp_path / "ab.json")]
    else:
        argv = ["bisect", case, "--good", good, "--bad", bad]
    code = main([*argv, "--configfile", str(suite_file), "--cache", str(cache), *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and expected in err[0], err
    assert cache.is_file() or not (cache / "builds").exists()  # nothing was keyed


def side_steps(shas: list[str]) -> tuple[list, dict]:
    """Two measured steps (ends, then a midpoint against the good end) and a failed
    one, as bisect/run.py collects them, with each revision's prepared case: what the
    history is given after a bisection, built here without measuring."""
    from workflow.bisect.history import now
    from workflow.bisect.search import Step

    identity = {"id": CASE, "model": "widening", "config": "default", "dtype": "f32",
                "shape": [64, 256], "sku": "sync", "backend": "iree", "recipe": "baseline",
                "mode": "inference", "workload": "widening-64x256-f32", "device": "cpu"}
    built = {sha: {"identity": identity, "key": f"{i:x}" * 64,
                   "sku": {"measurement": {"noisy_cv": 0.1}, "iree": {"device": "local-sync"}}}
             for i, sha in enumerate(shas)}

    def step(base, new, base_ms, new_ms):
        row = {"base": base, "new": new, "base_ms": base_ms, "new_ms": new_ms,
               "invocation": {"base": {"repetitions": 3}, "new": {"repetitions": 3}},
               "measured_at": now(), "ratio": new_ms[0] / base_ms[0], "verdict": "regression"}
        return Step(base, new, "regression", row["ratio"], None, len(base_ms), row)

    failed = Step(shas[0], shas[1], "failed", row={"base": shas[0], "new": shas[1],
                                                    "error": "compile failed"})
    return [step(shas[0], shas[2], [1.0, 1.1, 1.0], [2.0, 2.1, 2.2]), failed,
            step(shas[0], shas[1], [1.0, 1.05, 1.0], [1.0, 1.0, 1.02])], built


def test_the_steps_sides_land_in_the_history_under_their_shas(tmp_path, capsys):
    from workflow.bisect.history import history_line, keep
    from workflow.bisect.run import Source
    from workflow.suite.defaults import history_defaults

    shas = [c * 40 for c in "abc"]
    steps, built = side_steps(shas)
    source = Source("commit", "repo", "suite.yaml", shas, tree=lambda sha: tmp_path,
                    suite_dir=tmp_path)
    store = tmp_path / "store"
    kept = keep(steps, built, source, history_defaults(), store, tmp_path / "reports")
    assert kept["runs"] == 4 and len(kept["ingested"]) == 4, kept  # the failed step: none
    assert history_line(kept).startswith(f"history: 4 run(s) of the steps' sides kept in "
                                         f"{store}")
    assert main(["history", "show", CASE, "--store", str(store), "--format", "json"]) == 0
    series = json.loads(capsys.readouterr().out)
    points = [p for s in series for p in s["points"]]
    assert sorted(p["head_sha"] for p in points) == sorted([shas[0], shas[2], shas[0],
                                                             shas[1]])
    slow = [p for p in points if p["head_sha"] == shas[2]]
    assert len(slow) == 1 and slow[0]["value"] == pytest.approx(2.1)
    # Named as a bisection's, so that `history show` tells them from nightly runs.
    assert main(["history", "show", "--store", str(store), "--format", "json"]) == 0
    assert {r["name"] for r in json.loads(capsys.readouterr().out)} == {"benchflow bisect"}
    # The same sides again add nothing (ingest knows its measurements).
    again = keep(steps, built, source, history_defaults(), store, tmp_path / "again")
    assert again["ingested"] == [] and len(again["already"]) == 4


def test_without_a_store_the_steps_are_not_kept_and_none_is_made(tmp_path, monkeypatch):
    from workflow.bisect.history import keep
    from workflow.bisect.run import Source
    from workflow.suite.defaults import history_defaults

    monkeypatch.chdir(tmp_path)
    shas = [c * 40 for c in "abc"]
    steps, built = side_steps(shas)
    source = Source("commit", "repo", "suite.yaml", shas, tree=lambda sha: tmp_path,
                    suite_dir=tmp_path)
    config = history_defaults()
    kept = keep(steps, built, source, config, None, tmp_path / "reports")
    assert kept["skipped"] == (f"history: no store at {config['path']}: the steps' "
                               "measurements were not kept (--store DIR keeps them there)")
    assert not (tmp_path / config["path"]).exists()


def test_a_revision_whose_model_ends_the_process_is_a_broken_one(tmp_path):
    """A model that calls os._exit(0) at import: the keying process exits 0 without its
    answer. That revision could not be keyed (skipped as broken), never a traceback."""
    from workflow.bisect.run import _unkeyed, call_prepare

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "model.py").write_text("import os\nos._exit(0)\n")
    write_suite(tree / "suite.yaml", suite())
    answer = call_prepare({"tree": str(tree), "suite": "suite.yaml", "case": CASE,
                           "tools": {}, "label": "r1", "build": None},
                          tmp_path / "logs" / "r1.log")
    assert answer["failed"]["stage"] == "prepare", answer
    assert answer["failed"]["error"].startswith(
        "the revision's process exited 0 without its answer: its suite or a model file "
        "ended the process"), answer
    assert _unkeyed(answer).startswith(WHY["bisect-model-exits"])


def test_a_long_reason_a_revision_was_skipped_for_is_cut_between_words():
    """A skip reason past its 200 characters ended `... SyntaxErr`: cut at a space."""
    from workflow.bisect.run import _unkeyed

    error = "x" * 178 + " SyntaxError: invalid syntax (model.py, line 3)"
    why = _unkeyed({"failed": {"stage": "prepare", "error": error}})
    assert why == f"could not be keyed (prepare failed: {'x' * 178}...)", why
    assert len(why) <= len("could not be keyed ()") + 200
