"""`--config torchao_device=cpu` (issue 46, item 1): torchao's published files are all
`device: cuda`, so on a CPU machine every case is unsupported; the override runs every
entry on one device instead, its cases named and recorded for where they ran (SKU
cpu-host, device cpu, no -cuda in the workload id), and the report's provenance.notes
says that the file asked another device."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import DATA, snakemake, write_suite
from workflow.errors import ConfigError
from workflow.planning.plan import Refused, load_suite, report_notes
from workflow.records.report import build_report, validate_report
from workflow.render import html
from workflow.suite import torchao
from workflow.suite.load import load

UPSTREAM = DATA / "upstream" / "torchao"
# torchao's last published dashboard file: 240 cases, every entry `device: "cuda"`.
CUDA_FILE = UPSTREAM / "published" / "dbef6992fb6b.dashboard.microbenchmark_quantization_config.yml"
# torchao v1's test config: two cuda entries and one cpu entry.
MIXED_FILE = UPSTREAM / "published" / "6b76adbedaf0.microbenchmarks.test.benchmark_config.yml"
CPU_FILE = UPSTREAM / "cpu" / "dbef6992fb6b.dashboard.microbenchmark_quantization_config.cpu.yml"
NOTE = "torchao file asked cuda; run on cpu by torchao_device=cpu"


def test_a_cuda_file_runs_on_this_machines_cpu_with_the_override():
    plain = load([CUDA_FILE])
    suite = load_suite([CUDA_FILE], {"torchao_device": "cpu"})  # as the Snakefile loads it
    assert len(suite.cases) == len(plain.cases) == 240
    assert list(suite.config["skus"]) == ["cpu-host"]
    assert {(c.sku, c.workload.device) for c in suite.cases} == {("cpu-host", "cpu")}
    # Named for where they ran: the same workloads less their -cuda.
    assert {c.id.replace("cpu-host/", "cuda/", 1).replace("-bf16/", "-bf16-cuda/")
            for c in suite.cases} == {c.id for c in plain.cases}
    assert {sku for sku, _ in suite.torch_batches} == {"cpu-host"}
    # Measured as a torchao file's CPU entries are: forked invocations, no warm-up time.
    assert suite.sku("cpu-host") == load([CPU_FILE]).sku("cpu-host")
    assert report_notes(suite) == [NOTE] and report_notes(plain) == []


def test_the_note_names_every_device_the_file_asked_for():
    suite = load([MIXED_FILE], {"torchao_device": "cpu"})
    assert {c.sku for c in suite.cases} == {"cpu-host"}
    assert report_notes(suite) == ["torchao file asked cpu and cuda; run on cpu by "
                                   "torchao_device=cpu"]
    # Nothing moved, nothing noted.
    assert report_notes(load([CPU_FILE], {"torchao_device": "cpu"})) == []


def test_the_override_to_cuda_makes_cuda_cases():
    """A device the machine lacks stays unsupported, decided by the torch job as for an
    entry's own `device: cuda`: planned here on the SKU named cuda."""
    suite = load([CPU_FILE], {"torchao_device": "cuda"})
    assert {(c.sku, c.workload.device) for c in suite.cases} == {("cuda", "cuda")}
    assert all(c.workload.id.endswith("-cuda") for c in suite.cases)


def test_the_note_reaches_the_reports_provenance():
    report = build_report([], suite_name="s", config_hash="h", config_source="t.yml",
                          notes=[NOTE])
    validate_report(report)
    assert report["provenance"]["notes"] == [NOTE]
    assert ("Notes", NOTE) in html.meta(report, None)  # the page's header says it too
    assert "notes" not in build_report([], suite_name="s", config_hash="h",
                                       config_source="t.yml")["provenance"]


@pytest.mark.parametrize("value, expected", [
    ("tpu", "--config torchao_device=\"tpu\": torchao_device: expected cpu, cuda, mps or xpu "
            "(the device every model_params entry then runs on), or null, got 'tpu'"),
    (1, "--config torchao_device=1: torchao_device: expected cpu, cuda, mps or xpu"),
])
def test_an_unknown_device_is_refused_naming_the_override(value, expected):
    with pytest.raises(Refused) as err:
        load_suite([CUDA_FILE], {"torchao_device": value})
    (line,) = err.value.problems
    assert line.startswith(expected), line


def test_a_suite_without_torchao_entries_refuses_the_override(tmp_path):
    path = write_suite(tmp_path / "s.yml", {"workloads": [{"model": "linear"}]})
    with pytest.raises(ConfigError) as err:
        load([path], {"torchao_device": "cpu"})
    assert err.value.problems == [
        f"{path}: torchao_device: 'cpu' given to a suite without torchao model_params "
        "entries; expected a torchao microbenchmark file (it moves their `device`), or no "
        "torchao_device"]


def test_a_file_whose_own_sku_is_named_cuda_is_refused_not_misfiled(tmp_path):
    data = {**yaml.safe_load(CUDA_FILE.read_text()), "skus": {"cuda": {}}}
    path = write_suite(tmp_path / "own.yml", data)
    assert {c.sku for c in load([path]).cases} == {"cuda"}
    with pytest.raises(ConfigError) as err:
        load([path], {"torchao_device": "cpu"})
    (line,) = err.value.problems
    assert line.startswith(f"{path}: model_params[0].device: its cpu (torchao_device) torch "
                           "cases would be measured and reported under SKU 'cuda'")


@pytest.mark.parametrize("raw, skus", [
    ({"model_params": [{"device": "cuda"}], "torchao_device": "cpu"}, ["cpu-host"]),
    ({"model_params": [{"device": "cuda"}, {}], "torchao_device": "xpu"}, ["xpu"]),
    ({"model_params": [{"device": "cuda"}], "torchao_device": "tpu"}, ["cuda"]),  # schema's
    ({"model_params": [{"device": "cuda"}], "torchao_device": ["cpu"]}, ["cuda"]),
])
def test_the_skus_a_file_gets_follow_the_override(raw, skus):
    assert sorted(torchao.with_torchao_skus(raw)["skus"]) == skus


@pytest.mark.e2e
def test_a_trimmed_upstream_cuda_file_runs_on_the_cpu_through_snakemake(tmp_path):
    """torchao's last dashboard file, trimmed to one tiny shape and one recipe (baseline,
    eager: torchao v1's use_torch_compile false), runs with the override through plain
    snakemake: its case is on cpu-host, and the report says the file asked cuda."""
    data = yaml.safe_load(CUDA_FILE.read_text())
    entry = {**data["model_params"][0], "use_torch_compile": False,
             "matrix_shapes": [{"name": "custom", "shapes": [[16, 32, 32]]}]}
    assert entry["device"] == "cuda"
    path = write_suite(tmp_path / "trimmed.yml", {**data, "model_params": [entry],
                                                  "quantization_config_recipe_names": []})
    snakemake(tmp_path, "results/report.json", "--configfile", str(path),
              "--config", "torchao_device=cpu")
    report = json.loads((tmp_path / "results" / "report.json").read_text())
    assert report["provenance"]["notes"] == [NOTE]
    (case,) = report["cases"]
    assert case["id"] == "cpu-host/torch-eager/linear-16x32x32-bf16/baseline"
    assert (case["sku"], case["device"], case["status"]) == ("cpu-host", "cpu", "ok"), case
    assert case["timing"]["median_ms"] > 0
