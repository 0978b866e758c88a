"""Content-addressed reuse, end to end: a result is reused only when what it was made
from is unchanged, by content (planning/keys.py), and only when its files still verify
(jobs/iree_batch.reuse_problem); everything else is measured again, saying why."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, snakemake, tiny_suite, write_suite
from tests.shared_runs import settle, up_to_date
from tests.test_e2e import job_counts, mtimes, read_report

pytestmark = pytest.mark.e2e

# A user's model file, first with one Linear, then edited to three Linears and two
# activations: its export and compile must follow the code.
MODEL_V1 = '''
from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model


@benchmark_model(default_shape=(8, 16), shape_doc="[rows, cols]")
def my_model(config, dtype, layers, shape):
    import torch

    gen = seeded()
    module = torch.nn.Linear(shape[1], 16)
    return finish(module, (torch.randn(*shape, generator=gen),), dtype)
'''
MODEL_V2 = MODEL_V1.replace(
    "module = torch.nn.Linear(shape[1], 16)",
    "module = torch.nn.Sequential(torch.nn.Linear(shape[1], 16), torch.nn.ReLU(),\n"
    "                                   torch.nn.Linear(16, 32), torch.nn.Tanh(),\n"
    "                                   torch.nn.Linear(32, 16))")


def cases_by_id(workdir: Path) -> dict[str, dict]:
    return {c["id"]: c for c in read_report(workdir)["cases"]}


@pytest.fixture(scope="module")
def user_model(tmp_path_factory):
    """A suite of a built-in and a user's model on two SKUs, run once."""
    workdir = tmp_path_factory.mktemp("content")
    (workdir / "my_model.py").write_text(MODEL_V1)
    suite = tiny_suite(model_modules=["my_model.py"],
                       workloads=[{"model": "linear", "shapes": [[16, 32, 32]]},
                                  {"model": "my_model"}])
    write_suite(workdir / "suite.yaml", suite)
    snakemake(workdir, "results/report.json", "--configfile", str(workdir / "suite.yaml"))
    up_to_date(workdir)
    return workdir


def run(workdir: Path, *args: str):
    return snakemake(workdir, "results/report.json", "--configfile",
                     str(workdir / "suite.yaml"), *args)


def test_editing_a_model_file_reruns_its_cases_only(user_model):
    w = user_model
    settle(w, lambda: run(w))
    before_cases = cases_by_id(w)
    mine = [i for i in before_cases if "my_model" in i]
    assert {before_cases[i]["compile"]["dispatch_count"] for i in mine} == {1}
    # Touched but unchanged: nothing to do (a key of content, not of mtimes).
    os.utime(w / "my_model.py")
    assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(run(w, "-n"))
    # A comment is not code: still nothing to do.
    (w / "my_model.py").write_text(MODEL_V1 + "\n# a note\n")
    assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(run(w, "-n"))

    (w / "my_model.py").write_text(MODEL_V2)
    dry = run(w, "-n")
    assert job_counts(dry) == {"iree_batch": 2, "report": 1}, dry.stdout
    # Snakemake says why: the content param before and now names the file.
    assert "Params have changed" in dry.stdout and "my_model.py" in dry.stdout
    before = mtimes(w)
    run(w)
    after = mtimes(w)
    rewritten = {p for p in after if after[p] != before.get(p)}
    assert not any("linear-16x32x32" in p for p in rewritten), rewritten
    assert any(p.startswith("results/export/my_model") for p in rewritten), rewritten
    now = cases_by_id(w)
    assert {now[i]["compile"]["dispatch_count"] for i in mine} != {1}
    assert all(now[i]["status"] == "ok" for i in now)
    log = (w / "logs" / "iree" / "host" / "b0.log").read_text()
    assert "host/iree/linear-16x32x32-f32/baseline: reused" in log
    assert "host/iree/my_model-f32/baseline: measuring again: its inputs changed: " \
           "model sources changed: " in log
    # One SKU's batch exports again, the other's reuses that new export.
    export_logs = [(w / "logs/iree" / sku / "cases/my_model-f32.log").read_text()
                   for sku in ("host", "generic")]
    assert sum("exporting (its inputs changed: model sources changed:" in log
               for log in export_logs) == 1, export_logs
    assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(run(w))
    up_to_date(w)


LINEAR, MINE = "linear-16x32x32-f32", "my_model-f32"


def record(sku: str, workload: str) -> str:
    return f"results/cases/{sku}/iree/{workload}/baseline.json"


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _edit_record(path: Path) -> None:
    data = json.loads(path.read_text())
    data["timing"]["median_ms"] /= 10  # job_key kept: only the bytes tell
    path.write_text(json.dumps(data))


def test_a_truncated_mlir_is_exported_again_and_its_cases_checked(user_model):
    w = user_model
    settle(w, lambda: run(w))  # only when an earlier test left it changed
    _truncate(w / f"results/export/{LINEAR}/module.mlirbc")
    text = (lambda p: p.stdout + p.stderr)(run(w))
    assert f"host/iree/{LINEAR}/baseline: results/export/{LINEAR}/module.mlirbc: its size " \
           "changed" in text and "measures it again" in text, text
    last = {sku: _last_line(w, sku, LINEAR) for sku in ("host", "generic")}
    # Both SKUs' cases were compiled from it: the first batch to run exports again and
    # measures its case again; the export being byte-identical, the other batch's case
    # verifies and is reused (content, not mtimes).
    assert any(f"measuring again: results/export/{LINEAR}/module.mlirbc: its size changed"
               in line for line in last.values()), last
    exports = [(w / f"logs/iree/{sku}/cases/{LINEAR}.log").read_text()
               for sku in ("host", "generic")]
    assert any(f"exporting (results/export/{LINEAR}/module.mlirbc: its size changed" in log
               for log in exports)
    # The other member of the batch is reused, not measured again.
    assert ": reused (" in _last_line(w, "host", MINE)
    assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(run(w))
    up_to_date(w)


def test_damaged_results_are_measured_again_saying_why(user_model):
    """One damage per case, all at once: a truncated module, a record edited by hand (its
    job_key kept), a deleted record, another case's record in place of one's own."""
    w = user_model
    settle(w, lambda: run(w))  # only when an earlier test left it changed
    shutil.copyfile(w / record("generic", LINEAR), w / record("generic", MINE))
    _truncate(w / f"results/compile/host/{LINEAR}/module.vmfb")
    _edit_record(w / record("generic", LINEAR))
    (w / record("host", MINE)).unlink()
    text = (lambda p: p.stdout + p.stderr)(run(w))
    why = {("host", LINEAR): f"results/compile/host/{LINEAR}/module.vmfb: its size changed",
           # Rewritten records: their size or else their sha256 differs.
           ("generic", LINEAR): f"{record('generic', LINEAR)}: its ",
           ("host", MINE): f"{record('host', MINE)}: it is missing",
           ("generic", MINE): f"{record('generic', MINE)}: its "}
    for (sku, workload), reason in why.items():
        # Said before any job, and again by the batch that measures it.
        assert f"{sku}/iree/{workload}/baseline: {reason}" in text, text
        assert f"measuring again: {reason}" in _last_line(w, sku, workload)
        data = json.loads((w / record(sku, workload)).read_text())
        assert data["id"] == f"{sku}/iree/{workload}/baseline" and data["status"] == "ok"
    assert "Nothing to be done" in (lambda p: p.stdout + p.stderr)(run(w))
    up_to_date(w)


def _last_line(w: Path, sku: str, workload: str) -> str:
    log = (w / "logs" / "iree" / sku / "b0.log").read_text().splitlines()
    return [ln for ln in log if ln.startswith(f"{sku}/iree/{workload}/baseline: ")][-1]


def test_a_timed_out_export_is_tried_again_with_a_longer_timeout_or_when_forced(
        tmp_path, monkeypatch):
    # The export itself must run into its timeout: no copy from the session's cache.
    monkeypatch.delenv("BENCHFLOW_EXPORT_CACHE", raising=False)
    suite = tiny_suite(timeouts={"export_s": 0.5}, workloads=[{"model": "linear"}])
    path = write_suite(tmp_path / "suite.yaml", suite)
    snakemake(tmp_path, "results/report.json", "--configfile", str(path))
    assert {c["stage"] for c in read_report(tmp_path)["cases"]} == {"export"}
    # Forced with the same timeout: one SKU's batch tries the export again, the other
    # shares that run's failure instead of trying a third time.
    snakemake(tmp_path, "results/report.json", "--configfile", str(path),
              "--forcerun", "iree_batch")
    logs = [(tmp_path / "logs/iree" / sku / "cases/linear-f32.log").read_text()
            for sku in ("host", "generic")]
    last_export = sorted([ln for ln in log.splitlines() if ln.startswith("export ")][-1]
                         .split(": ", 1)[1] for log in logs)
    assert last_export == [
        "exporting (it failed in an earlier run, and this rerun was forced)",
        "reused from results/export/linear-f32/export.json (failed)"], logs
    # A longer timeout: the failed cases' batches rerun and the export succeeds.
    suite["timeouts"]["export_s"] = 900
    write_suite(path, suite)
    dry = snakemake(tmp_path, "-n", "results/report.json", "--configfile", str(path))
    assert job_counts(dry)["iree_batch"] == 2
    snakemake(tmp_path, "results/report.json", "--configfile", str(path))
    assert {c["status"] for c in read_report(tmp_path)["cases"]} == {"ok"}
    logs = [(tmp_path / "logs/iree" / sku / "cases/linear-f32.log").read_text()
            for sku in ("host", "generic")]
    assert any("exporting (it failed with timeout 0.5 s, now 900 s)" in log for log in logs)


def test_editing_a_built_in_models_module_reruns_its_workloads_only(tmp_path):
    """A copy of the repository's workflow package is imported instead of the installed
    one (PYTHONPATH), and one built-in model file of the copy is edited."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "workflow", copy / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("Snakefile", "rules", "scripts", "config", "envs", "report"):
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copyfile)(src, copy / name)
    env = {**os.environ, "PYTHONPATH": f"{copy}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    work = tmp_path / "work"
    work.mkdir()
    suite = tiny_suite(workloads=[{"model": "linear", "shapes": [[16, 32, 32]]},
                                  {"model": "mnist"}])
    suite["skus"].pop("generic")
    write_suite(work / "suite.yaml", suite)

    def go(*args):
        import subprocess
        import sys

        proc = subprocess.run(
            [sys.executable, "-m", "snakemake", "-s", str(copy / "Snakefile"), "--directory",
             str(work), "--cores", "2", "results/report.json", "--configfile",
             str(work / "suite.yaml"), *args], capture_output=True, text=True, env=env,
            cwd=work,  # not the checkout: `python -m` puts the working directory first
            timeout=900)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    go()
    vision = copy / "workflow/models/vision.py"
    vision.write_text(vision.read_text() + textwrap.dedent("""
        EDITED = True  # code, not a comment: the module's syntax tree changes
    """))
    dry = go("-n")
    assert "workflow/models/vision.py" in dry.stdout
    go()
    log = (work / "logs/iree/host/b0.log").read_text()
    assert "host/iree/linear-16x32x32-f32/baseline: reused" in log
    assert "host/iree/mnist-f32/baseline: measuring again: its inputs changed: model " \
           "sources changed: workflow/models/vision.py" in log
