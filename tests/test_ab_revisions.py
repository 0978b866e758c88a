"""`benchflow ab --base REV --new REV` (issue 44): the whole suite at two commits of a
repository built here. A branch that widens one model and renames a variable in another:
the widened case is a regression with its dispatch, the renamed model's case built the
same module at both revisions and is not measured, the rest have unchanged inputs. Two
commits that differ in a notes file measure nothing. Malformed revisions are one line,
exit 2, the work tree untouched."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import FAST_MEASUREMENT, init_repo, write_suite
from tests.model_sources import growing_model
from workflow.cli.main import main

pytestmark = [pytest.mark.tool]

WIDENING = growing_model("widening", (64, 256))
RENAMED = '''
from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model


@benchmark_model(default_shape=(32, 64), shape_doc="[rows, cols]")
def scaling(config, dtype, layers, shape):
    """x * 2 + 1, its local variable named {name}."""
    import torch

    {name}, k = shape
    gen = seeded()

    class Scale(torch.nn.Module):
        def forward(self, x):
            return x * 2 + 1

    return finish(Scale(), (torch.randn({name}, k, generator=gen),), dtype)
'''
WIDENED = "sync/iree/widening-64x256-f32/baseline"
WIDENED_EAGER = "sync/torch-eager/widening-64x256-f32/baseline"
RENAMED_CASE = "sync/iree/scaling-32x64-f32/baseline"


def suite() -> dict:
    return {"suite_name": "pr",
            # One thread each (IREE's local-sync, torch's threads: 1): what a loaded
            # 2-core machine measures steadily.
            "skus": {"sync": {"iree": {"target_cpu": "host", "device": "local-sync"},
                              "torch": {"threads": 1},
                              "measurement": {**FAST_MEASUREMENT, "min_time_s": 0.02,
                                              "torch_warmup_calls": 2, "torch_warmup_s": 0.02,
                                              "torch_min_run_time_s": 0.05}},
                     # A GPU SKU on this CPU machine: compiled at both revisions, not timed.
                     "gpu": {"iree": {"target_backend": "cuda", "target_chip": "sm_80",
                                      "device": "cuda"},
                             "measurement": dict(FAST_MEASUREMENT)}},
            "backends": ["iree", "torch-eager"],
            "workloads": [{"model": "widening", "shapes": [[64, 256]], "skus": ["sync"]},
                          {"model": "widening", "shapes": [[64, 256]], "skus": ["gpu"],
                           "backends": ["iree"]},
                          {"model": "scaling", "shapes": [[32, 64]], "backends": ["iree"],
                           "skus": ["sync"]},
                          {"model": "linear", "shapes": [[16, 32, 32]], "backends": ["iree"],
                           "skus": ["sync"]}],
            "model_modules": ["models/widening.py", "models/scaling.py"],
            # Short torch blocks, one pair of workers: a x4 change decides in 8 rounds.
            "ab": {"margin": 0.05, "max_rounds": 64, "budget_s": 60, "torch_block_s": 0.05,
                   "torch_worker_rounds": 16}}


def git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def commit(repo: Path, message: str, *, width=256, name="m", notes="") -> str:
    (repo / "models").mkdir(exist_ok=True)
    (repo / "models" / "widening.py").write_text(WIDENING.format(width=width))
    (repo / "models" / "scaling.py").write_text(RENAMED.format(name=name))
    (repo / "notes.txt").write_text(notes)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path) -> Path:
    repo = init_repo(tmp_path / "repo")
    write_suite(repo / "suite.yaml", suite())
    commit(repo, "base")
    return repo


def ab(repo: Path, capsys, *args: str) -> tuple[int, str, str]:
    code = main(["ab", "--configfile", str(repo / "suite.yaml"),
                 "--cache", str(repo.parent / "cache"), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.e2e
def test_a_branch_that_widens_a_model_is_a_regression_and_the_rest_is_listed(
        repo, capsys, monkeypatch, tmp_path):
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "widen", width=2048)
    commit(repo, "rename", width=2048, name="rows")
    git(repo, "checkout", "-q", "main")
    status = git(repo, "status", "--porcelain")
    step_summary = tmp_path / "step_summary.md"
    step_summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    monkeypatch.chdir(tmp_path)
    start = time.monotonic()
    store = tmp_path / "store"
    code, out, err = ab(repo, capsys, "--base", "main", "--new", "feature",
                        "--summary", str(tmp_path / "pr.md"), "--store", str(store))
    print(err, out, f"({time.monotonic() - start:.0f} s)")
    assert code == 1, out + err
    doc = json.loads((tmp_path / "results" / "ab.json").read_text())
    rows = {r["case"]: r for r in doc["pairs"]}
    assert sorted(rows) == [WIDENED, WIDENED_EAGER]
    for row in rows.values():  # each side built or run from its own revision's model file
        assert row["verdict"] == "regression" and row["ratio"] > 1.5, row
        assert row["attribution"]["lines"], row
    assert rows[WIDENED_EAGER]["kind"] == "torch"
    assert "models/widening.py" in rows[WIDENED_EAGER]["attribution"]["what_changed"]
    assert doc["same_module"] == [RENAMED_CASE]
    assert doc["unchanged"] == ["sync/iree/linear-16x32x32-f32/baseline"]
    (gpu, ) = doc["compile_only"]  # compiled at both revisions, never a failure
    assert gpu["case"] == "gpu/iree/widening-64x256-f32/baseline" and "cuda" in gpu["why"]
    assert doc["revisions"]["base"] == git(repo, "rev-parse", "main")
    lines = out.splitlines()
    assert lines[1].startswith(f"REGRESSION    {WIDENED}  x")
    assert lines[2].startswith("  ") and "dispatch" in lines[2]
    assert lines[-1].startswith("FAIL: 2 case(s) regressed")
    pr = (tmp_path / "pr.md").read_text()
    assert pr.startswith("### benchflow ab: pr, ") and "| **regression** |" in pr
    assert step_summary.read_text() == "earlier step\n" + pr
    assert git(repo, "status", "--porcelain") == status  # the work tree untouched
    # The measured IREE case's two sides, each under its revision, named as the A/B's.
    assert doc["history"]["runs"] == 2 and len(doc["history"]["ingested"]) == 2, doc
    assert lines[-2] == f"history: 2 run(s) of the steps' sides kept in {store} (0 already " \
        "there)"
    capsys.readouterr()
    assert main(["history", "show", "--store", str(store), "--format", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in runs} == {"benchflow ab"}
    assert sorted(r["head_sha"] for r in runs) == sorted(doc["revisions"][k]
                                                         for k in ("base", "new"))


def test_two_commits_that_differ_in_a_notes_file_measure_nothing(repo, capsys, tmp_path,
                                                                 monkeypatch):
    commit(repo, "notes only", notes="a release note\n")
    monkeypatch.chdir(tmp_path)
    start = time.monotonic()
    code, out, _ = ab(repo, capsys, "--base", "HEAD~1", "--new", "HEAD")
    took = time.monotonic() - start
    print(out, f"({took:.1f} s)")
    assert code == 0, out
    assert out.splitlines()[-1] == ("ok: no regression; 0 changed case(s) measured, 5 with "
                                    "unchanged inputs (not measured)")
    doc = json.loads((tmp_path / "results" / "ab.json").read_text())
    assert doc["pairs"] == [] and len(doc["unchanged"]) == 5


@pytest.mark.parametrize("what", ["unknown", "not-ancestor", "dirty", "invalid-suite",
                                  "output-of-a-suite", "output-a-fifo", "store-not-a-store"])
def test_malformed_revisions_are_one_line_and_exit_2(repo, capsys, tmp_path, monkeypatch,
                                                     what):
    monkeypatch.chdir(tmp_path)
    base, new = "main", "HEAD"
    if what == "unknown":
        new = "no-such-branch"
    elif what == "not-ancestor":
        commit(repo, "later", notes="x\n")
        base, new = "HEAD", "HEAD~1"
    elif what == "dirty":
        (repo / "notes.txt").write_text("edited, not committed\n")
    elif what == "invalid-suite":
        (repo / "suite.yaml").write_text("skus: [not, a, mapping]\n")
        git(repo, "commit", "-q", "-am", "break the suite")
        base = "HEAD~1"
    elif what == "output-of-a-suite":
        (tmp_path / "results").mkdir()
        (tmp_path / "results" / "ab.json").write_text('{"pairs": []}')
    elif what == "output-a-fifo":  # read without blocking: only a regular file is read
        (tmp_path / "results").mkdir()
        os.mkfifo(tmp_path / "results" / "ab.json")
    extra = []
    if what == "store-not-a-store":
        (tmp_path / "store").write_text("a file\n")
        extra = ["--store", str(tmp_path / "store")]
    status = git(repo, "status", "--porcelain")
    code, out, err = ab(repo, capsys, "--base", base, "--new", new, *extra)
    assert code == 2, out + err
    assert len(err.strip().splitlines()) == 1, err
    expected = {"unknown": "--new 'no-such-branch': no such commit",
                "not-ancestor": "is not an ancestor of --new",
                "dirty": "uncommitted changes to 1 tracked file(s) (e.g. notes.txt)",
                "invalid-suite": "the suite does not load",
                "output-of-a-suite": "--output: holds something other than",
                "output-a-fifo": "--output: holds something other than",
                "store-not-a-store": str(tmp_path / "store")}[what]
    assert expected in err, err
    assert git(repo, "status", "--porcelain") == status


# --- bisect's revision families, as a two-revision A/B meets them ----------------------

def test_a_tree_is_read_as_committed_export_ignore_and_all(repo, capsys, tmp_path,
                                                           monkeypatch):
    """`git archive` left out a model file marked export-ignore: the suite did not load."""
    (repo / ".gitattributes").write_text("models/* export-ignore\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "attributes")
    commit(repo, "notes", notes="n\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = ab(repo, capsys, "--base", "HEAD~1", "--new", "HEAD")
    assert code == 0, out + err


def test_a_shallow_clone_is_said_to_be_shallow(repo, capsys, tmp_path, monkeypatch):
    commit(repo, "notes", notes="n\n")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(clone)],
                   check=True, capture_output=True)
    monkeypatch.chdir(tmp_path)
    code, out, err = ab(clone, capsys, "--base", "HEAD~1", "--new", "HEAD")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "shallow" in err and "git fetch --unshallow" in err, err


def test_a_revision_whose_model_ends_the_process_at_import_is_one_line(repo, capsys,
                                                                       tmp_path, monkeypatch):
    (repo / "models" / "scaling.py").write_text("import os\nos._exit(3)\n")
    git(repo, "commit", "-q", "-am", "a model that exits at import")
    monkeypatch.chdir(tmp_path)
    code, out, err = ab(repo, capsys, "--base", "HEAD~1", "--new", "HEAD")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "at " + git(repo, "rev-parse", "HEAD")[:12] in err and "does not load" in err, err
    assert "Traceback" not in err


def test_the_default_cache_is_outside_the_work_tree(repo, capsys, monkeypatch, tmp_path):
    commit(repo, "notes", notes="n\n")
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path / "user-cache"))
    monkeypatch.chdir(repo)
    code = main(["ab", "--configfile", "suite.yaml", "--base", "HEAD~1", "--new", "HEAD",
                 "--output", str(tmp_path / "ab.json")])
    assert code == 0, capsys.readouterr()
    assert git(repo, "status", "--porcelain", "--ignored") == ""
    assert (tmp_path / "user-cache" / "bisect").is_dir()


@pytest.mark.e2e
def test_a_model_that_fails_at_one_revision_is_its_failed_case_and_the_rest_go_on(
        repo, capsys, tmp_path, monkeypatch):
    """The new revision's widening model crashes when called: its IREE exports and its
    torch worker fail there, each a failed row naming the revision; the renamed
    model's case is still compared (the same module: not measured)."""
    (repo / "models" / "widening.py").write_text(WIDENING.format(width=256).replace(
        "    return finish(", "    import os, signal\n\n    class Crash(torch.nn.Module):\n"
        "        def forward(self, x):\n            os.kill(os.getpid(), signal.SIGKILL)\n\n"
        "    module = Crash()\n    return finish("))
    (repo / "models" / "scaling.py").write_text(RENAMED.format(name="rows"))
    git(repo, "commit", "-q", "-am", "a model that crashes when called")
    monkeypatch.chdir(tmp_path)
    code, out, err = ab(repo, capsys, "--base", "HEAD~1", "--new", "HEAD")
    assert code == 3, out + err
    doc = json.loads((tmp_path / "results" / "ab.json").read_text())
    rows = {r["case"]: r for r in doc["pairs"]}
    assert {rows[c]["verdict"] for c in (WIDENED, WIDENED_EAGER)} == {"failed"}, rows
    new = doc["revisions"]["new"]
    assert new in rows[WIDENED]["error"], rows[WIDENED]
    assert doc["same_module"] == [RENAMED_CASE]
    # The GPU SKU's case too: its export at the new revision crashed, before any device.
    assert rows["gpu/iree/widening-64x256-f32/baseline"]["verdict"] == "failed"
    assert out.splitlines()[-1].startswith("COULD NOT JUDGE: 3 changed case(s) could not be "
                                           "judged")


def test_a_case_unsupported_at_either_revision_is_listed_unsupported_not_measured():
    """A case the base revision could not run (a recipe it lacked) has no side to
    compare: unsupported, never sent to be built or measured at both revisions."""
    from workflow.bisect.suite_ab import classify

    def case(key, unsupported=False, kind="torch"):
        return {"key": key, "unsupported": unsupported, "backend_kind": kind}

    base = {"a": case("k1", unsupported=True), "b": case("k2", kind="iree"), "c": case("k3")}
    new = {"a": case("k9"), "b": case("k8", kind="iree"), "c": case("k3")}
    got = classify(base, new, None)
    assert got["unsupported"] == ["a"] and got["iree"] == ["b"] and got["unchanged"] == ["c"]
    assert got["torch"] == []
