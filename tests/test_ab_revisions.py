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
from tests.model_sources import RENAMED, growing_model
from workflow.cli.main import main

pytestmark = [pytest.mark.tool]

WIDENING = growing_model("widening", (64, 256))
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


def commit(repo: Path, message: str, *, width=256, name="m", notes="", rows="m") -> str:
    """A commit of the models and notes; `name`: the scaling model's variable (IREE
    only), `rows`: the widening model's (a model that runs on torch-eager too)."""
    (repo / "models").mkdir(exist_ok=True)
    (repo / "models" / "widening.py").write_text(
        WIDENING.format(width=width).replace("m, k = shape", f"{rows}, k = shape")
        .replace("randn(m, k,", f"randn({rows}, k,"))
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


# The malformed inputs of a two-revision A/B (docs/malformed-inputs.md).
CASES = [
    ("ab-unknown", "--new names no commit", "--new 'no-such-branch': no such commit"),
    ("ab-swapped", "--base and --new given the other way round (--new an ancestor of "
     "--base)", "--new 'HEAD~1' is an ancestor of --base 'HEAD', so there is no change"),
    ("ab-unrelated", "--base and --new share no history (an orphan branch)",
     "have no common ancestor"),
    ("ab-dirty", "a tracked file edited and not committed",
     "uncommitted changes to 1 tracked file(s) (e.g. notes.txt)"),
    ("ab-invalid-suite", "the suite does not load at one revision", "the suite does not load"),
    ("ab-output-of-a-suite", "--output holds a suite's own ab.json",
     "--output: holds something other than"),
    ("ab-output-a-fifo", "--output is a FIFO (read without blocking)",
     "--output: holds something other than"),
    ("ab-store-not-a-store", "--store is a regular file", "/store: "),
]


@pytest.mark.parametrize("what,desc,expected", CASES, ids=[c[0] for c in CASES])
def test_malformed_revisions_are_one_line_and_exit_2(repo, capsys, tmp_path, monkeypatch,
                                                     what, desc, expected):
    monkeypatch.chdir(tmp_path)
    base, new = "main", "HEAD"
    if what == "ab-unknown":
        new = "no-such-branch"
    elif what == "ab-swapped":
        commit(repo, "later", notes="x\n")
        base, new = "HEAD", "HEAD~1"
    elif what == "ab-unrelated":
        git(repo, "checkout", "-q", "--orphan", "elsewhere")
        commit(repo, "a history of its own", notes="y\n")
        git(repo, "checkout", "-q", "main")
        new = "elsewhere"
    elif what == "ab-dirty":
        (repo / "notes.txt").write_text("edited, not committed\n")
    elif what == "ab-invalid-suite":
        (repo / "suite.yaml").write_text("skus: [not, a, mapping]\n")
        git(repo, "commit", "-q", "-am", "break the suite")
        base = "HEAD~1"
    elif what == "ab-output-of-a-suite":
        (tmp_path / "results").mkdir()
        (tmp_path / "results" / "ab.json").write_text('{"pairs": []}')
    elif what == "ab-output-a-fifo":  # read without blocking: only a regular file is read
        (tmp_path / "results").mkdir()
        os.mkfifo(tmp_path / "results" / "ab.json")
    extra = []
    if what == "ab-store-not-a-store":
        (tmp_path / "store").write_text("a file\n")
        extra = ["--store", str(tmp_path / "store")]
    status = git(repo, "status", "--porcelain")
    code, out, err = ab(repo, capsys, "--base", base, "--new", new, *extra)
    assert code == 2, out + err
    assert len(err.strip().splitlines()) == 1, err
    assert expected in err, err
    assert "Traceback" not in err
    assert git(repo, "status", "--porcelain") == status


def test_a_base_that_moved_on_is_compared_at_the_merge_base(repo, capsys, tmp_path,
                                                            monkeypatch):
    """The base branch got a commit after the feature branched off it (a merge request
    whose target moved): the feature is compared with their merge base, as `git diff
    main...feature` shows its change, and says so; the base's own later commit (here a
    widened model) is not the feature's change and is not measured."""
    fork = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "release notes", notes="a note\n")
    git(repo, "checkout", "-q", "main")
    moved = commit(repo, "main moves on", width=2048)
    monkeypatch.chdir(tmp_path)
    code, out, err = ab(repo, capsys, "--base", "main", "--new", "feature")
    assert code == 0, out + err
    doc = json.loads((tmp_path / "results" / "ab.json").read_text())
    revs = doc["revisions"]
    assert revs["base"] == fork and revs["base_named"] == moved and revs["merge_base"], revs
    assert revs["base_ref"] == "main"
    assert doc["pairs"] == [] and len(doc["unchanged"]) == 5, doc
    lines = out.splitlines()
    assert lines[1] == (f"against the merge base {fork[:12]} of --base main ({moved[:12]}) "
                        "and the new revision, as `git diff main...` compares: the base "
                        "branch's later commits are not this change"), out
    assert "merge base" in err
    # An ancestor --base is itself the merge base: nothing said about it.
    code, out, _ = ab(repo, capsys, "--base", fork, "--new", "feature",
                      "--output", str(tmp_path / "again.json"))
    assert code == 0 and "merge base" not in out
    assert json.loads((tmp_path / "again.json").read_text())["revisions"]["merge_base"] is False


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


# --- what torch runs, and equivalence at the suite's tolerance ---------------------------

PROGRAM = '''
from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model


@benchmark_model(default_shape=(16, 32), shape_doc="[rows, cols]")
def {model}(config, dtype, layers, shape):
    """Linear, ReLU, Linear: its variables and its first layer's attribute named {{rows}}
    and {{attr}} (a rename moves nothing torch runs)."""
    import torch

    {rows}, k = shape
    gen = seeded()

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.{attr} = torch.nn.Linear(k, k, bias=False)
            self.out = torch.nn.Linear(k, {width}, bias=False)

        def forward(self, x):
            # a comment
            return self.out(torch.relu(self.{attr}(x)))

    return finish(Net(), (torch.randn({rows}, k, generator=gen),), dtype)
'''


def test_a_renamed_variable_or_attribute_exports_the_same_torch_program(tmp_path):
    """What torch runs, without names or debug locations: a renamed local variable, a
    renamed submodule attribute and a moved line give the same digest; a wider layer,
    another shape or dtype do not (the mode, recipe and settings are keyed beside it:
    prepare.torch_programs)."""
    from workflow.backends.torch.program import program_digest

    def digest(model, *, rows="m", attr="proj", width=32, shape=(16, 32), dtype="f32",
               pad=""):
        path = tmp_path / f"{model}.py"
        path.write_text(pad + PROGRAM.format(model=model, rows=rows, attr=attr, width=width))
        return program_digest({"model": model, "config": "default", "dtype": dtype,
                               "layers": None, "shape": list(shape), "mode": "inference",
                               "model_modules": [str(path)]})

    base = digest("net_base")
    assert digest("net_renamed", rows="rows", attr="first", pad="\n\n# moved\n") == base
    assert digest("net_wider", width=64) != base
    assert digest("net_taller", shape=(32, 32)) != base
    assert digest("net_half", dtype="bf16") != base


def test_the_same_program_needs_both_sides_exported_and_equal():
    """A side that could not be exported (the error of each) is measured, never taken
    as the same program as the other."""
    from workflow.bisect import suite_ab

    assert suite_ab.same_program({"program": "p1"}, {"program": "p1"})
    assert not suite_ab.same_program({"program": "p1"}, {"program": "p2"})
    assert not suite_ab.same_program({"error": "export failed"}, {"error": "export failed"})
    assert not suite_ab.same_program(None, {"program": "p1"})


def _inconclusive(ci, ratio=1.004, rounds=185):
    return {"verdict": "inconclusive", "ratio": ratio, "ci": list(ci), "ci95": list(ci),
            "rounds": rounds, "seconds": 122.9, "stop_reason": "time-budget",
            "to_decide": None, "case": "sync/torch-eager/normproj-16x64-f32/baseline",
            "p_value": 0.4, "base": "a" * 12, "new": "b" * 12, "workload": "normproj-16x64-f32",
            "mde": None}


def test_an_interval_inside_the_tolerance_is_no_difference_at_that_margin():
    """x1.004 [0.994, 1.014] after 185 rounds: the 1 % margin was not reached, but the
    interval lies well inside the gate's x1.10: no-difference, the row and its line
    naming the margin used, and the comparison passes. An interval reaching beyond
    the tolerance stays inconclusive; a decided row is left as it is."""
    from workflow.bisect.suite_ab import judged_at_tolerance, outcome
    from workflow.records.ab import validate_ab
    from workflow.render.ab_revisions import text_lines

    row = judged_at_tolerance(_inconclusive((0.994, 1.014)), 0.01, 1.10)
    assert row["verdict"] == "no-difference" and row["ab_margin_verdict"] == "inconclusive"
    assert row["equivalence"] == {"margin": pytest.approx(0.10), "setting": "goldens.tolerance",
                                  "tolerance": 1.10, "ab_margin": 0.01}
    wide = judged_at_tolerance(_inconclusive((0.990, 1.238), ratio=1.061), 0.01, 1.10)
    assert wide["verdict"] == "inconclusive"
    assert judged_at_tolerance(_inconclusive((0.994, 1.014)), 0.01, 1.005)["verdict"] \
        == "inconclusive"  # a tolerance inside the margin adds nothing
    regressed = {**_inconclusive((1.02, 1.05), ratio=1.03), "verdict": "regression"}
    assert judged_at_tolerance(regressed, 0.01, 1.10) is regressed
    doc = {"pairs": [row], "unchanged": [], "same_module": [], "compile_only": [],
           "added": [], "removed": [], "unsupported": [],
           "revisions": {"base": "a" * 40, "new": "b" * 40, "suite": "suite.yaml"}}
    validate_ab({"schema_version": "1.1", "suite_name": "s", "config_hash": "",
                 "generated_at": "", **doc})
    doc["outcome"], doc["summary"] = outcome(doc)
    doc["headline"] = f"ok: {doc['summary']}"
    assert doc["outcome"] == "passed"
    (line, ) = [t for t in text_lines(doc) if t.startswith("NO-DIFFERENCE")]
    assert line.endswith("185 rounds, 122.9 s (time-budget); no-difference at the "
                         "goldens.tolerance margin 10% (interval within [0.909, 1.100]); "
                         "the ab.margin 1% was not reached in 185 rounds"), line


def test_an_interrupt_while_both_revisions_are_prepared_stops_at_once():
    """Ctrl-C while the two revisions' processes run at once (each in a session of its
    own, which the terminal's Ctrl-C does not reach): both are ended, and the command
    leaves within seconds, not when they would have finished."""
    import _thread
    import signal
    import sys
    import threading

    # Python's own Ctrl-C handling, as `benchflow` has it at a terminal: a test run started
    # in the background inherits SIGINT ignored, and interrupt_main then does nothing.
    old = signal.signal(signal.SIGINT, signal.default_int_handler)

    from workflow.backends.proc import run_tool
    from workflow.bisect.suite_ab import _at_once

    def slow():
        run_tool([sys.executable, "-c", "import time; time.sleep(60)"], stage="prepare",
                 timeout=120)

    try:
        threading.Timer(1.0, _thread.interrupt_main).start()
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            _at_once({"base": slow, "new": slow})
        assert time.monotonic() - start < 10
    finally:
        signal.signal(signal.SIGINT, old)
