"""An IREE batch makes the exports it needs several at a time before it measures any case
(jobs/iree_batch.export_ahead): on the H100 one after another they were most of a GPU
batch's time (11-18 s each)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import DATA, tiny_suite, write_suite
from workflow.jobs.iree_batch import batch_job
from workflow.paths import (
    EXPORT_META,
    IREE_BASELINE_RUN_TIMING,
    IREE_CASE_LOG,
    iree_batch_path,
)
from workflow.planning import keys, resources
from workflow.planning.plan import iree_batch_plan
from workflow.suite.load import Workload, load

WORKLOADS = [{"model": "linear", "shapes": [[8, 16, 16]]}, {"model": "crashing_model"}]


def test_exports_at_once_follow_the_cores_and_memory_covers_them():
    """One per core, at most EXPORT_WORKERS_MAX, never more than there are; the memory
    asked for covers the largest of them made together, and a one-thread job (SLURM's
    profile) asks what it asked before."""
    assert [resources.export_workers(n, t) for n, t in ((5, 1), (5, 2), (1, 16), (9, 16))] \
        == [1, 2, 1, resources.EXPORT_WORKERS_MAX]
    bert = Workload("b", "bert", "base", "f32", (1, 128), None)
    linear = Workload("l", "linear", "default", "f32", (8, 16, 16), None)
    alone = resources.iree_batch_mem_mb([bert, bert, linear])
    assert alone == resources.export_mem_mb(bert)
    assert resources.iree_batch_mem_mb([bert, bert, linear], threads=1) == alone
    two = resources.iree_batch_mem_mb([bert, bert, linear], threads=2)
    three = resources.iree_batch_mem_mb([bert, bert, linear], threads=16)
    assert alone < two < three < 3 * alone
    assert two < resources.iree_batch_mem_mb([bert, bert], 2, threads=2) <= 2 * two  # a retry


@pytest.mark.tool
def test_a_batch_exports_before_it_measures_and_a_crash_stays_its_case(tmp_path, monkeypatch):
    """Two cases, two cores: every export is made before any case is timed, each case's
    cost counts its own export, the crashing model's export is its failed case while
    the others are measured, and a second run reuses them all."""
    monkeypatch.chdir(tmp_path)
    # Exports made here, by this batch's workers: not copied from the session's cache.
    monkeypatch.delenv("BENCHFLOW_EXPORT_CACHE", raising=False)
    cfg = tiny_suite(model_modules=[str(DATA / "extra_models.py")], workloads=WORKLOADS)
    cfg["skus"].pop("generic")
    suite = load([write_suite(tmp_path / "s.yaml", cfg)])
    (key, ) = suite.iree_batches
    batch = iree_batch_path(key)
    Path(batch).parent.mkdir(parents=True, exist_ok=True)

    def run(content):
        out = batch_job(cases=iree_batch_plan(suite, *key), sku=suite.sku("host"),
                        tolerances=keys.dtype_tolerances(suite.config["accuracy"]),
                        timeouts=suite.config["timeouts"], gate=suite.config["goldens"],
                        batch=batch, log=str(tmp_path / "batch.log"), content=content,
                        threads=2)
        return {c["id"].split("/")[2]: (c, json.loads(Path(c["case"]).read_text()))
                for c in out["cases"]}

    first = run({"run": 1})
    crashed = first["crashing_model-f32"][1]
    assert (crashed["status"], crashed["stage"]) == ("failed", "export"), crashed["error"]
    assert "signal" in crashed["error"].lower() or "SIGKILL" in crashed["error"]
    made = {w: os.stat(EXPORT_META.format(workload=w)).st_mtime_ns for w in first}
    timed = {w: os.stat(IREE_BASELINE_RUN_TIMING.format(sku="host", workload=w)).st_mtime_ns
             for w in first if first[w][1]["status"] == "ok"}
    assert len(timed) == 1 and max(made.values()) < min(timed.values())
    for workload, (_, record) in first.items():
        log = Path(IREE_CASE_LOG.format(sku="host", workload=workload)).read_text()
        assert log.index("exporting (not exported yet)") < log.index("reused from"), log
        if record["status"] == "ok":
            assert record["cost"]["export_s"] > 0.5  # a torch process's export, not the reuse
    again = run({"run": 2})
    assert all(listed["reused"] for listed, _ in again.values())


def test_an_interrupted_batch_keeps_the_members_it_measured(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM in the middle of an IREE batch: the cases measured before it
    are kept as members (the rerun reuses them), as a batch that finished keeps them;
    with no context, so that the rerun is never taken for a forced one. Each is on disk
    before the next starts, so a SIGKILL (nothing runs on the way out) keeps them too."""
    from workflow.jobs import iree_batch
    from workflow.planning.members import members_path, read_members
    from workflow.records.storage import write_json

    monkeypatch.chdir(tmp_path)
    cfg = tiny_suite(workloads=[{"model": "linear", "shapes": [[8, 16, 16], [8, 32, 16]]}])
    cfg["skus"].pop("generic")
    suite = load([write_suite(tmp_path / "s.yaml", cfg)])
    (key, ) = suite.iree_batches
    batch = iree_batch_path(key)
    Path(batch).parent.mkdir(parents=True, exist_ok=True)
    measured, seen = [], []

    def case_job(*, identity, case, **_):
        if measured:
            # Kept on disk before the next member starts: a SIGKILL here keeps it too.
            seen.append(list(read_members(members_path(batch))))
            raise KeyboardInterrupt  # the second case: the interrupt while it runs
        measured.append(identity["id"])
        write_json(case, {"id": identity["id"], "status": "ok"})
        return {"status": "ok"}

    monkeypatch.setattr(iree_batch, "case_job", case_job)
    with pytest.raises(KeyboardInterrupt):
        batch_job(cases=iree_batch_plan(suite, *key), sku=suite.sku("host"),
                  tolerances=keys.dtype_tolerances(suite.config["accuracy"]),
                  timeouts=suite.config["timeouts"], gate=suite.config["goldens"],
                  batch=batch, log=str(tmp_path / "batch.log"), threads=1)
    assert not Path(batch).exists()  # unfinished: Snakemake runs it again
    assert list(read_members(members_path(batch))) == measured and len(measured) == 1
    assert seen == [measured]
    assert json.loads(members_path(batch).read_text())["context"] is None
