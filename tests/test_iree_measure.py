"""The IREE measurement protocol (workflow.stages.iree.measure) on canned
iree-benchmark-module runs: what each timing field means."""

from __future__ import annotations

import pytest

from workflow.backends.iree.tools import BenchmarkRun
from workflow.stages import iree as stage

M = {"invocations": 3, "repetitions": 3, "min_warmup_time_s": 0.0, "min_time_s": 0.01,
     "noisy_cv": 10.0, "rerun_noisy": False}


def run(reps: list[float], aggregates: dict | None = None) -> BenchmarkRun:
    return BenchmarkRun(repetition_ms=reps, aggregates_ms=aggregates or {}, cv=None,
                        context={})


def measured(monkeypatch, runs: list[BenchmarkRun]) -> dict:
    queue = [run([5.0]), *runs]  # the first call, then the invocations
    monkeypatch.setattr(stage, "_benchmark", lambda argv, timeout, log: queue.pop(0))
    monkeypatch.setattr(stage.iree, "runtime_version", lambda: "test")
    out = stage.measure(lambda **kw: ["iree-benchmark-module"], M, 10.0, "unused")
    assert not queue
    return out["timing"]


def test_invocation_means_are_means_or_null_never_medians(monkeypatch):
    # 1 ms, 2 ms, 9 ms: median 2, mean 4. Without a `mean` aggregate, the mean is unknown.
    timing = measured(monkeypatch, [run([1.0, 2.0, 9.0], {"mean": 4.0, "median": 2.0}),
                                    run([1.0, 2.0, 9.0]),
                                    run([1.0, 2.0, 9.0], {"median": 2.0})])
    assert timing["invocation_medians_ms"] == [2.0, 2.0, 2.0]
    assert timing["invocation_means_ms"] == [pytest.approx(4.0), None, None]


def test_a_single_repetition_is_its_own_mean(monkeypatch):
    # One repetition: Google Benchmark writes no aggregates, and the repetition's time is
    # the mean over its iterations.
    timing = measured(monkeypatch, [run([3.0]), run([4.0]), run([5.0])])
    assert timing["invocation_means_ms"] == [3.0, 4.0, 5.0]


def test_repetitions_are_benchmark_repetitions_and_calls_are_unknown(monkeypatch):
    timing = measured(monkeypatch, [run([1.0, 2.0, 3.0])] * 3)
    assert timing["repetitions"] == M["repetitions"]
    assert timing["calls_per_invocation"] is None
