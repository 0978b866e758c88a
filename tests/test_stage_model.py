"""The stage model: a tool's failure is a recorded result, benchflow's own bug fails the
job and caches nothing (DESIGN.md, Failures)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import snakemake, tiny_suite, write_suite
from workflow.backends.proc import run_python
from workflow.errors import OwnBug, StageError, raised_in_own_code
from workflow.jobs.model import run_stage
from workflow.records.stage import StageResult


def _raise(exc):
    raise exc


def test_a_tool_failure_is_written_as_a_failed_result(tmp_path):
    meta, art = tmp_path / "compile.json", tmp_path / "module.vmfb"
    out = run_stage("compile", str(meta), [str(art)], [],
                    lambda: _raise(StageError("compile", "iree-compile exited with 1")))
    assert out.status == "failed" and out.failed_stage == "compile"
    on_disk = StageResult.read(meta)
    assert on_disk.error == "iree-compile exited with 1" and art.read_bytes() == b""


def test_a_bug_in_a_stage_body_propagates_and_writes_nothing(tmp_path):
    meta = tmp_path / "timing.json"
    with pytest.raises(KeyError):
        run_stage("run", str(meta), [], [], lambda: {}["inputs"])
    assert not meta.exists()


def test_an_upstream_failure_is_carried_unchanged(tmp_path):
    up = tmp_path / "export.json"
    StageResult("export", "failed", "export", "boom").write(up)
    out = run_stage("compile", str(tmp_path / "c.json"), [], [str(up)],
                    lambda: _raise(AssertionError("must not run")))
    assert (out.status, out.failed_stage, out.error) == ("failed", "export", "boom")


def test_where_an_exception_was_raised_decides_whose_failure_it_is():
    from workflow.models.registry import get_model

    with pytest.raises(ValueError) as lib:
        json.loads("{")  # raised inside the json library: a tool's failure
    with pytest.raises(KeyError) as ours:
        StageResult.from_json({})  # raised inside workflow/records: our bug
    with pytest.raises(ValueError) as model:
        get_model("linear").build("default", "f32", None, [1])  # model code: the workload's
    assert not raised_in_own_code(lib.value)
    assert raised_in_own_code(ours.value)
    assert not raised_in_own_code(model.value)


@pytest.mark.tool
def test_a_worker_process_tells_a_tool_failure_from_our_bug(tmp_path):
    # Wrong argument count: a ValueError in workflow/backends/iree/verify.py, our own code.
    with pytest.raises(OwnBug, match="own code"):
        run_python("workflow.backends.iree.verify", ["only-one-argument"], stage="verify",
                   timeout=120)
    # A module file that is not there: IREE's runtime fails, a recorded tool failure.
    with pytest.raises(StageError) as info:
        run_python("workflow.backends.iree.verify",
                   [str(tmp_path / "missing.vmfb"), str(tmp_path / "in.npz"), "local-sync",
                    str(tmp_path / "out.npz")], stage="verify", timeout=120)
    assert info.value.stage == "verify" and "exited with 1" in info.value.message


@pytest.mark.e2e
def test_a_bug_fails_the_job_and_a_tool_failure_is_a_failed_case(tmp_path):
    suite = tiny_suite(workloads=[{"model": "linear", "shapes": [[16, 32, 32]]}])
    # A flag off the allow-list: the SKU opts in, so iree-compile itself refuses it.
    suite["skus"]["generic"]["iree"].update(compile_flags=["--iree-no-such-flag"],
                                            allow_any_compile_flags=True)
    cfg = str(write_suite(tmp_path / "suite.yaml", suite))
    snakemake(tmp_path, "results/report.json", "--configfile", cfg)
    report = json.loads((tmp_path / "results/report.json").read_text())
    by_sku = {c["sku"]: c for c in report["cases"]}
    # iree-compile exits non-zero: a failed case, named stage and the tool's own words.
    assert by_sku["generic"]["status"] == "failed" and by_sku["generic"]["stage"] == "compile"
    assert "--iree-no-such-flag" in by_sku["generic"]["error"]
    assert by_sku["host"]["status"] == "ok"

    # A stage JSON our own code cannot read (its `inputs` are gone): the batch job's run
    # stage raises KeyError in workflow/, which must fail the job and leave neither the
    # case's timing nor its record (nor the batch's list) behind.
    export_json = next((tmp_path / "results/export").glob("*/export.json"))
    meta = json.loads(export_json.read_text())
    del meta["inputs"]
    export_json.write_text(json.dumps(meta))
    timing = next((tmp_path / "results/run/host").glob("iree/*/baseline/timing.json"))
    case = next((tmp_path / "results/cases/host").glob("iree/*/baseline.json"))
    proc = snakemake(tmp_path, "results/iree/host/b0.json", "--configfile", cfg,
                     "--forcerun", "iree_batch", check=False)
    assert proc.returncode != 0
    assert "KeyError" in proc.stdout + proc.stderr
    assert not timing.exists() and not case.exists(), \
        "a bug's output must not be cached as a result"
    assert not (tmp_path / "results/iree/host/b0.json").exists()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
