"""results/dashboard.json: PyTorch OSS benchmark database v3 records, schema-validated."""

from __future__ import annotations

import copy

import jsonschema
import pytest

from tests.render_data import (
    PEAK,
    iree_report,
    torch_report,
    with_synthetic_verdicts,
    with_training,
)
from workflow.render import dashboard

RUNNER_FIELDS = {"name", "type", "cpu_info", "cpu_count", "mem_info", "avail_mem_in_gb",
                 "gpu_info", "gpu_count", "gpu_mem_info", "avail_gpu_mem_in_gb", "extra_info"}


def extra_infos(record: dict):
    yield record["benchmark"]["extra_info"]
    yield record["model"]["extra_info"]
    yield record["metric"]["extra_info"]
    yield from (r["extra_info"] for r in record["runners"])
    yield from (i["extra_info"] for i in record["inputs"].values())
    yield from (d["extra_info"] for d in record["dependencies"].values())


def test_records_are_v3_shaped_and_valid():
    report = iree_report()
    records = dashboard.render(report, PEAK)
    ok = [c for c in report["cases"] if c["status"] == "ok"]
    assert {r["benchmark"]["extra_info"]["case_id"] for r in records} == {c["id"] for c in ok}
    for record in records:
        assert set(record) == {"benchmark", "model", "inputs", "dependencies", "metric",
                               "runners"}
        assert record["benchmark"]["extra_info"]["device"] == "cpu"
        assert record["metric"]["name"] and record["metric"]["extra_info"]["unit"]
        assert set(record["runners"][0]) == RUNNER_FIELDS
        for info in extra_infos(record):
            assert all(isinstance(v, str) for v in info.values()), info
    versions = report["provenance"]["versions"]
    deps = records[0]["dependencies"]
    assert {k: d["version"] for k, d in deps.items()} == {
        "torch": versions["torch"], "iree": versions["iree-base-compiler"],
        "snakemake": versions["snakemake"], "torchao": versions["torchao"]}
    runner = records[0]["runners"][0]
    host = report["provenance"]["host"]
    assert runner["cpu_count"] == host["cores"] and runner["cpu_info"] == host["cpu_model"]
    assert runner["avail_mem_in_gb"] == host["memory_bytes"] // 1024**3
    assert runner["extra_info"]["hostname"] == host["name"]


def test_latency_carries_every_invocation_and_the_golden_as_target():
    report = with_synthetic_verdicts(iree_report())
    regressed = next(c for c in report["cases"] if c["golden"]["verdict"] == "regression")
    records = dashboard.render(report, PEAK)
    latency = next(r for r in records if r["metric"]["name"] == "latency median (ms)"
                   and r["benchmark"]["extra_info"]["case_id"] == regressed["id"])
    assert latency["metric"]["benchmark_values"] == regressed["timing"]["invocation_medians_ms"]
    assert latency["metric"]["target_value"] == pytest.approx(regressed["golden"]["value_ms"])
    assert latency["benchmark"]["extra_info"]["golden_verdict"] == "regression"
    names = {r["metric"]["name"] for r in records
             if r["benchmark"]["extra_info"]["case_id"] == regressed["id"]}
    assert {"compile time (s)", "dispatch count", "binary size (bytes)",
            "throughput (GFLOP/s)", "percent of peak (%)", "accuracy (pcc)"} <= names


@pytest.mark.parametrize("path, value", [
    (("benchmark", "extra_info", "device"), ""),
    (("metric", "name"), ""),
    (("model", "extra_info", "layers"), 2),
    (("metric", "benchmark_values"), []),
    (("runners", 0, "cpu_count"), -1),
])
def test_the_schema_refuses_what_the_dashboard_would_drop(path, value):
    record = copy.deepcopy(dashboard.render(iree_report(), PEAK)[0])
    target = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        dashboard.validate([record])


def cuda_report(provenance: dict) -> dict:
    """The torch report with one ok case turned into a CUDA case (SYNTHETIC)."""
    report = torch_report()
    case = next(c for c in report["cases"] if c["status"] == "ok")
    case["device"] = "cuda"
    case["provenance"] = {**case["provenance"], **provenance,
                          "synthetic": "SYNTHETIC CUDA case for renderer tests"}
    return report, case


def runners_of(records: list[dict], case_id: str) -> list[dict]:
    return [r["runners"][0] for r in records if r["benchmark"]["extra_info"]["case_id"] == case_id]


@pytest.mark.slow
def test_a_cuda_case_runs_on_a_cuda_runner_and_cpu_cases_on_a_cpu_one():
    report, case = cuda_report({"gpu_name": "NVIDIA H100 80GB HBM3", "gpu_count": 2,
                                "gpu_memory_bytes": 80 * 1024**3})
    records = dashboard.render(report, PEAK)
    gpu = runners_of(records, case["id"])
    assert gpu and all(r == gpu[0] for r in gpu)
    runner = gpu[0]
    assert set(runner) == RUNNER_FIELDS
    # test-infra's gather_runners_info: name the device kind, type the GPU's model.
    assert (runner["name"], runner["type"], runner["gpu_info"]) == (
        "cuda", "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3")
    assert runner["gpu_count"] == 2 and runner["avail_gpu_mem_in_gb"] == 160
    assert runner["cpu_info"] == report["provenance"]["host"]["cpu_model"]
    bench = next(r["benchmark"] for r in records
                 if r["benchmark"]["extra_info"]["case_id"] == case["id"])
    assert bench["extra_info"]["device"] == "cuda"
    assert bench["extra_info"]["arch"] == "NVIDIA H100 80GB HBM3"
    others = [r["runners"][0] for r in records
              if r["benchmark"]["extra_info"]["case_id"] != case["id"]]
    assert others and all(r["name"] == "cpu" and r["gpu_count"] == 0 and r["gpu_info"] == ""
                          for r in others)


@pytest.mark.slow
def test_a_cuda_case_without_a_recorded_gpu_still_counts_one():
    report, case = cuda_report({})
    runner = runners_of(dashboard.render(report, PEAK), case["id"])[0]
    assert (runner["name"], runner["type"], runner["gpu_count"]) == ("cuda", "unknown", 1)
    assert runner["gpu_info"] == "" and runner["avail_gpu_mem_in_gb"] == 0


@pytest.mark.slow
def test_training_steps_are_training_records():
    """benchmark.mode is the case's mode, so a training step never reads as inference."""
    records = dashboard.render(with_training(torch_report()), PEAK)
    modes = {r["benchmark"]["extra_info"]["case_id"]: r["benchmark"]["mode"] for r in records}
    train = {k for k, v in modes.items() if v == "training"}
    assert train == {"host/torch-eager/linear-64x64x64-f32-train/baseline",
                     "host/torch-inductor/linear-64x64x64-f32-train/baseline"}
    assert {v for k, v in modes.items() if k not in train} == {"inference"}
