"""An IREE case's `kernels` (issue 25): one profiling invocation after the timed ones
(jobs/kernels.py), a compile-only case's dispatch list from the compiler's CSV
statistics, and the record's rows capped (records/kernels.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import FAST_MEASUREMENT, snakemake, tiny_suite, write_suite
from workflow.backends.iree import profile
from workflow.backends.iree.tools import BenchmarkRun
from workflow.errors import StageError
from workflow.jobs import iree as stage
from workflow.records.case import assemble
from workflow.records.kernels import TOP, capped_rows, kernels_section
from workflow.records.report import case_problem
from workflow.records.stage import StageResult
from workflow.stats.enums import Status

# --- rows capped ---------------------------------------------------------------------------


def _rows(n: int) -> list[dict]:
    total = n * (n + 1) / 2
    return [{"name": f"main$async_dispatch_{i}", "count": 10, "total_ms": float(n - i),
             "mean_ms": (n - i) / 10, "share": (n - i) / total, "min_ms": 0.0, "max_ms": 1.0,
             "workgroup": {"count": [1, 1, 1]}} for i in range(n)]


def test_rows_past_the_top_are_summed_into_one_others_row():
    rows = capped_rows(_rows(TOP + 6))
    assert len(rows) == TOP + 1 and rows[:TOP] == [
        {k: r[k] for k in ("name", "count", "total_ms", "mean_ms", "share", "workgroup")}
        for r in _rows(TOP + 6)[:TOP]]
    assert rows[-1] == {"name": "(6 others)", "count": 60, "total_ms": 21.0, "mean_ms": None,
                        "share": pytest.approx(21 / 465), "workgroup": None}
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    # As many rows as are kept: no others row.
    assert [r["name"] for r in capped_rows(_rows(TOP))] == [r["name"] for r in _rows(TOP)]


def test_a_section_totals_its_rows_and_a_list_without_times_has_no_total():
    section = kernels_section(source="iree-profile", mode="host-execution", calls=10,
                              rows=_rows(30), seconds=0.5)
    assert section["total_ms"] == 465.0
    assert sum(r["total_ms"] for r in section["rows"]) == 465.0
    listed = kernels_section(source="iree-compile", mode="compile-only", calls=None,
                             rows=[{"name": "d", "count": 2, "total_ms": None, "share": None}],
                             seconds=None)
    assert listed["total_ms"] is None and listed["rows"][0]["count"] == 2


# --- a profiling failure: the section says why, the case stays ok --------------------------

M = {**FAST_MEASUREMENT, "invocations": 3, "max_invocations": 3, "noisy_cv": 10.0,
     "rerun_noisy": False, "alpha": 0.05, "budget_s": 600, "max_retakes": 0,
     "randomize_layout": False, "profile": True, "profile_calls": 7}
SKU = {"iree": {"target_backend": "llvm-cpu", "target_cpu": "generic", "device": "local-sync",
                "task_topology_max_group_count": None, "benchmark_tool": "/bin/ibm"},
       "measurement": M, "torch": {"threads": 1}}
IDENTITY = {"id": "generic/iree/linear-4x8x8-f32/baseline", "model": "linear",
            "config": "default", "dtype": "f32", "shape": [4, 8, 8], "sku": "generic",
            "backend": "iree", "recipe": "baseline", "mode": "inference",
            "workload": "linear-4x8x8-f32", "layers": None, "device": "cpu",
            "compile_mode": None, "group": None}


def _run_with(monkeypatch, tmp_path, profile_case) -> StageResult:
    """run_iree on canned iree-benchmark-module runs, with `profile_case` in place of
    the profiling tools."""
    runs = [BenchmarkRun([5.0], {}, None, {})] + [BenchmarkRun([1.0, 1.1, 1.2], {}, None, {})
                                                 for _ in range(3)]
    monkeypatch.setattr(stage, "benchmark_run", lambda argv, timeout, log, env=None: runs.pop(0))
    monkeypatch.setattr(stage.iree, "runtime_version", lambda: "test")
    monkeypatch.setattr(profile, "profile_case", profile_case)
    np.savez(tmp_path / "inputs.npz", arg0=np.zeros((4, 8), np.float32))
    (tmp_path / "export.json").write_text(json.dumps({"inputs": [{"dtype": "float32"}]}))
    compiled = StageResult(stage="compile", data={"seconds": 1.0, "binary_bytes": 10,
                                                  "dispatch_count": 1, "executable_count": 1,
                                                  "flags": []})
    compiled.write(tmp_path / "compile.json")
    result = stage.run_iree(vmfb=str(tmp_path / "m.vmfb"),
                            compile_meta=str(tmp_path / "compile.json"),
                            export_meta=str(tmp_path / "export.json"),
                            inputs=str(tmp_path / "inputs.npz"), sku=SKU, timeout=30,
                            timing=str(tmp_path / "timing.json"), log=str(tmp_path / "log"))
    assert not runs  # the first call and three invocations: the profile took none of them
    return result


def test_a_profiling_failure_is_the_sections_error_and_the_case_stays_ok(monkeypatch, tmp_path):
    seen = {}

    def refused(argv, *, timeout, log, iterations):
        seen.update(argv=argv, iterations=iterations)
        raise StageError("profile", "profiling (host-execution) failed: UNIMPLEMENTED")

    result = _run_with(monkeypatch, tmp_path, refused)
    assert result.ok and result.data["timing"]["invocations"] == 3
    # The profiled argv is the timing's, with the SKU's profile_calls.
    assert seen == {"argv": result.data["command"], "iterations": 7}
    record = assemble(IDENTITY, [StageResult.read(tmp_path / "compile.json"), result], {})
    assert record["status"] == Status.OK and record["error"] is None
    kernels = record["kernels"]
    assert kernels["error"] == "profiling (host-execution) failed: UNIMPLEMENTED"
    assert (kernels["rows"], kernels["source"], kernels["calls"]) == ([], "iree-profile", 7)
    assert kernels["seconds"] >= 0 and record["timing"]["invocations"] == 3
    assert case_problem(record) is None


def test_profile_false_runs_no_profile(monkeypatch, tmp_path):
    monkeypatch.setitem(SKU, "measurement", {**M, "profile": False})

    def never(*args, **kwargs):
        raise AssertionError("profiled with profile: false")

    result = _run_with(monkeypatch, tmp_path, never)
    assert result.ok and result.data["kernels"] is None


# --- through Snakemake ---------------------------------------------------------------------

CALLS = 3


@pytest.mark.e2e
def test_cases_record_their_dispatches_apart_from_their_timing(tmp_path):
    """A tiny workload on three SKUs: profiled (its counts: calls x the dispatches a call
    runs, as the compiler lists them), not profiled, and compiled for cuda only (the
    compiler's dispatch names, no times)."""
    # No noisy rerun: a loaded machine must not change the invocation count checked below.
    m = {**FAST_MEASUREMENT, "profile_calls": CALLS, "rerun_noisy": False}
    suite = tiny_suite(workloads=[{"model": "ln_linear_relu", "shapes": [[16, 32, 64]]}],
                       skus={"generic": {"iree": {"target_cpu": "generic",
                                                  "device": "local-sync"}, "measurement": m},
                             "off": {"iree": {"target_cpu": "generic", "device": "local-sync"},
                                     "measurement": {**m, "profile": False}},
                             "cuda": {"iree": {"target_backend": "cuda", "target_chip": "sm_80",
                                               "device": "cuda"}, "measurement": m}})
    write_suite(tmp_path / "suite.yaml", suite)
    snakemake(tmp_path, "results/report.json", "--configfile", str(tmp_path / "suite.yaml"))
    cases = {c["sku"]: c for c in json.loads(
        (tmp_path / "results/report.json").read_text())["cases"] if c["backend"] == "iree"}
    workload = cases["generic"]["workload"]
    compiled = json.loads((tmp_path / f"results/compile/generic/{workload}/compile.json"
                           ).read_text())["kernels"]
    per_call = {r["name"]: r["count"] for r in compiled["rows"]}

    ok = cases["generic"]
    assert ok["status"] == Status.OK, ok["error"]
    kernels = ok["kernels"]
    assert kernels["error"] is None, kernels["error"]
    assert (kernels["source"], kernels["mode"], kernels["calls"]) == (
        "iree-profile", "host-execution", CALLS)
    assert {r["name"]: r["count"] for r in kernels["rows"]} == {
        n: CALLS * c for n, c in per_call.items()}
    assert all("dispatch" in r["name"] for r in kernels["rows"])
    assert sum(r["share"] for r in kernels["rows"]) == pytest.approx(1.0)
    assert kernels["total_ms"] == pytest.approx(sum(r["total_ms"] for r in kernels["rows"]))
    assert kernels["seconds"] > 0
    # The timing is the protocol's alone: its invocations, none more for the profile.
    assert ok["timing"]["invocations"] == FAST_MEASUREMENT["invocations"]
    assert len(ok["timing"]["invocation_medians_ms"]) == FAST_MEASUREMENT["invocations"]

    assert cases["off"]["status"] == Status.OK and cases["off"]["kernels"] is None

    listed = cases["cuda"]
    assert listed["status"] == Status.COMPILE_ONLY
    assert (listed["kernels"]["source"], listed["kernels"]["mode"]) == (
        "iree-compile", "compile-only")
    assert listed["kernels"]["calls"] is None and listed["kernels"]["total_ms"] is None
    names = [r["name"] for r in listed["kernels"]["rows"]]
    assert names and all("dispatch" in n for n in names)
    assert all(r["total_ms"] is None and r["share"] is None and r["count"] >= 1
               for r in listed["kernels"]["rows"])
    # The compile's counts are the CSV statistics' (one compile, one statistics format).
    assert listed["compile"]["dispatch_count"] >= len(names)
