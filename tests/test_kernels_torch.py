"""Torch cases' per-op profiles (issue 25): torch.profiler's key_averages() as the
record's `kernels` rows (backends/torch/ops_profile.py), recorded when the batch
worker characterizes eager, inductor and int8wo cases (that they reach the record
through the worker processes: tests/test_torch_bench.py's batch test). A CUDA case's rows,
its kernels: tests/test_gpu_kernels.py."""

from __future__ import annotations

import pytest

from tests.test_torch_bench import plan_of, suite_for
from workflow.backends.torch.characterize import characterize
from workflow.backends.torch.ops_profile import op_rows, profile_ops
from workflow.records import schemas
from workflow.records.kernels import TOP

LINEAR = [{"model": "linear", "shapes": [[16, 64, 64]]}]
PROFILE = {"profile": True, "profile_calls": 10}


def _kernels_schema() -> dict:
    return schemas.load("report")["$defs"]["case"]["properties"]["kernels"]


def _linear_step():
    import torch

    torch.manual_seed(0)
    layers = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU(),
                                 torch.nn.Linear(32, 32))
    x = torch.randn(4, 32)

    def step():
        with torch.no_grad():
            return layers(x)
    return step


def test_rows_are_each_ops_self_cpu_time_of_a_real_profile():
    import torch

    step = _linear_step()
    step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(5):
            step()
    events = prof.key_averages()
    rows = op_rows(events)
    by_name = {r["name"]: r for r in rows}
    # Two Linear layers with a bias: aten::addmm twice per call, aten::gelu once.
    assert by_name["aten::addmm"]["count"] == 10 and by_name["aten::gelu"]["count"] == 5
    # Self time, not inclusive time: aten::linear holds little of its addmm's time.
    linear = next(e for e in events if e.key == "aten::linear")
    assert by_name["aten::linear"]["total_ms"] == pytest.approx(linear.self_cpu_time_total / 1e3)
    assert by_name["aten::linear"]["total_ms"] < linear.cpu_time_total / 1e3
    # The rows add up to the profile's self time, largest first, shares summing to 1.
    assert sum(r["total_ms"] for r in rows) == pytest.approx(
        sum(e.self_cpu_time_total for e in events) / 1e3)
    assert [r["total_ms"] for r in rows] == sorted((r["total_ms"] for r in rows), reverse=True)
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    r = by_name["aten::addmm"]
    assert r["mean_ms"] == pytest.approx(r["total_ms"] / 10)


def test_profile_false_records_no_kernels_and_a_failing_step_records_why():
    import torch

    assert profile_ops(_linear_step(), lambda: None, {**PROFILE, "profile": False},
                       cuda=False) is None

    def bad_step():
        return torch.ones(2, 3) @ torch.ones(2, 3)  # raised in torch: the tool's failure

    got = profile_ops(bad_step, lambda: None, PROFILE, cuda=False)
    assert got["rows"] == [] and got["error"].startswith("RuntimeError: ")
    assert got["source"] == "torch.profiler" and got["seconds"] >= 0
    schemas.validator(_kernels_schema()).validate(got)


def test_many_ops_are_capped_with_one_others_row():
    import torch

    xs = [torch.randn(8, 8) for _ in range(3)]
    ops = [torch.abs, torch.exp, torch.sin, torch.cos, torch.tanh, torch.sigmoid, torch.neg,
           torch.sqrt, torch.log1p, torch.floor, torch.ceil, torch.round, torch.sign,
           torch.relu, torch.square, torch.reciprocal, torch.trunc, torch.frac, torch.erf,
           torch.expm1, torch.rsqrt, torch.log, torch.log2, torch.atan, torch.asinh,
           torch.sinh, torch.cosh]

    def step():
        return [op(x) for op in ops for x in xs]

    got = profile_ops(step, lambda: None, {**PROFILE, "profile_calls": 2}, cuda=False)
    schemas.validator(_kernels_schema()).validate(got)
    *kept, others = got["rows"]
    assert len(kept) == TOP and others["name"].endswith(" others)")
    assert sum(r["total_ms"] for r in got["rows"]) == pytest.approx(got["total_ms"])


def _kernels_of(tmp_path, backend: str, recipe: str) -> dict:
    suite = suite_for(tmp_path, LINEAR, recipes=["baseline", "int8wo"],
                      backends=("torch-eager", "torch-inductor"))
    (case,), plan = plan_of(suite, backend=backend, recipe=recipe)
    got = characterize(case, plan["backend"], plan)
    assert got["status"] == "ok", got.get("reason")
    kernels = got["kernels"]
    schemas.validator(_kernels_schema()).validate(kernels)
    assert (kernels["source"], kernels["mode"], kernels["calls"], kernels["error"]) == (
        "torch.profiler", "cpu", 10, None)
    assert kernels["total_ms"] > 0 and 0 < kernels["seconds"] < 5
    return kernels


def test_int8wo_replaces_the_baselines_matmul_ops(tmp_path):
    """torchao 0.18's int8 weight-only linear on the CPU: the int8 weight converted
    (aten::_to_copy), aten::mm, then scaled (aten::mul); elsewhere e.g.
    aten::_weight_int8pack_mm. Whatever the build, the op sets differ."""
    base = {r["name"] for r in _kernels_of(tmp_path, "torch-eager", "baseline")["rows"]}
    int8 = {r["name"] for r in _kernels_of(tmp_path, "torch-eager", "int8wo")["rows"]}
    assert "aten::mm" in base  # the linear model has no bias
    assert {"aten::_to_copy", "aten::mul"} <= int8 - base


@pytest.mark.slow
def test_inductor_rows_are_what_the_compiled_graph_calls(tmp_path):
    rows = _kernels_of(tmp_path, "torch-inductor", "baseline")["rows"]
    names = {r["name"] for r in rows}
    # The compiled region and the extern matmul it calls; no aten::linear (lowered away).
    assert any(n.startswith("Torch-Compiled Region") for n in names), names
    assert "aten::mm" in names and "aten::linear" not in names
