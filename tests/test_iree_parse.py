"""Parsing real iree-benchmark-module and iree-compile outputs."""

import json

import pytest

from tests.conftest import DATA
from workflow.backends.iree import tools as iree
from workflow.backends.iree.profile import compile_statistics


def real_output() -> str:
    return (DATA / "iree_benchmark_module.json").read_text()


def test_repetitions_are_parsed_in_milliseconds():
    run = iree.parse_benchmark_json(real_output())
    data = json.loads(real_output())
    reps = [b for b in data["benchmarks"] if b["run_type"] == "iteration"]
    assert len(run.repetition_ms) == len(reps) == 3
    assert run.repetition_ms == pytest.approx([b["real_time"] for b in reps])
    assert run.median_ms == pytest.approx(sorted(b["real_time"] for b in reps)[1])


def test_cv_aggregate_is_a_fraction_not_a_time():
    run = iree.parse_benchmark_json(real_output())
    data = json.loads(real_output())
    cv = next(b for b in data["benchmarks"] if b.get("aggregate_name") == "cv")
    assert cv["aggregate_unit"] == "percentage"
    assert run.cv == pytest.approx(cv["real_time"])
    assert "cv" not in run.aggregates_ms
    assert run.aggregates_ms["median"] == pytest.approx(run.median_ms)
    assert run.context["num_cpus"] >= 1 and "load_avg" in run.context


def test_time_units_are_converted():
    data = json.loads(real_output())
    for b in data["benchmarks"]:
        if b.get("aggregate_unit") != "percentage":
            b["real_time"] *= 1000.0
            b["time_unit"] = "us"
    run = iree.parse_benchmark_json(json.dumps(data))
    assert run.median_ms == pytest.approx(iree.parse_benchmark_json(real_output()).median_ms)
    assert run.cv == pytest.approx(iree.parse_benchmark_json(real_output()).cv)


def test_benchmark_errors_are_raised():
    data = json.loads(real_output())
    data["benchmarks"][0]["error_occurred"] = True
    data["benchmarks"][0]["error_message"] = "boom"
    with pytest.raises(ValueError, match="boom"):
        iree.parse_benchmark_json(json.dumps(data))
    with pytest.raises(ValueError, match="no repetition"):
        iree.parse_benchmark_json(json.dumps({"context": {}, "benchmarks": []}))


def test_compile_statistics_dispatch_count():
    # The compile asks for the CSV statistics, whose aggregate rows (one per stream
    # aggregate) give the counts, summed.
    argv = iree.compile_argv("iree-compile", "m.mlir", "m.vmfb", [], "s.csv")
    assert argv[-4:] == ["--iree-scheduling-dump-statistics-format=csv",
                         "--iree-scheduling-dump-statistics-file=s.csv", "-o", "m.vmfb"]
    aggregate = ('"Constants","Dispatches","Executables"\n1,{},{}\n')
    text = "; Aggregate Statistics\n" + aggregate.format(30, 10) + "\n" + aggregate.format(3, 2)
    assert compile_statistics(text)["dispatch_count"] == 33
    assert compile_statistics(text)["executable_count"] == 12


def test_command_lines_are_argument_lists_with_sku_settings():
    sku = {"iree": {"target_backend": "llvm-cpu", "target_cpu": "generic",
                    "compile_flags": ["--iree-opt-level=O2"], "device": "local-task",
                    "task_topology_max_group_count": 2}}
    flags = iree.compile_flags(sku)
    assert "--iree-llvmcpu-target-cpu=generic" in flags and flags[-1] == "--iree-opt-level=O2"
    argv = iree.benchmark_argv("ibm", "m.vmfb", "main", ["2x3xf32=@a.bin"], sku, repetitions=10,
                               warmup_s=0.5, min_time="0.05s")
    assert "--task_topology_max_group_count=2" in argv
    assert "--benchmark_repetitions=10" in argv and "--benchmark_format=json" in argv
    assert "--input=2x3xf32=@a.bin" in argv
