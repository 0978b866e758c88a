"""A torchao file without `skus` measures each entry on a SKU named after its device
(issue 35, item 2): `device: cuda` entries on `cuda`, CPU entries on `cpu-host`, a file
mixing devices on both; a file that names its own SKUs keeps them for every entry, but
never files an entry's cases under a SKU named for another device (issue 46, item 2)."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import DATA, write_suite
from workflow.errors import ConfigError
from workflow.suite import torchao
from workflow.suite.load import load
from workflow.suite.schema import validate_suite

UPSTREAM = DATA / "upstream" / "torchao"
# torchao's last published dashboard file: every entry `device: "cuda"` (as its H100 file).
CUDA_FILE = UPSTREAM / "published" / "dbef6992fb6b.dashboard.microbenchmark_quantization_config.yml"
# torchao v1's test config: two cuda entries and one cpu entry.
MIXED_FILE = UPSTREAM / "published" / "6b76adbedaf0.microbenchmarks.test.benchmark_config.yml"
CPU_FILE = UPSTREAM / "cpu" / "dbef6992fb6b.dashboard.microbenchmark_quantization_config.cpu.yml"


def devices_of(path) -> list[str]:
    params = yaml.safe_load(path.read_text())["model_params"]
    return [e.get("device", "cpu") for e in ([params] if isinstance(params, dict) else params)]


def test_a_cuda_file_measures_on_a_sku_named_cuda():
    assert set(devices_of(CUDA_FILE)) == {"cuda"}
    suite = load([CUDA_FILE])
    assert list(suite.config["skus"]) == ["cuda"]
    assert suite.cases and {c.sku for c in suite.cases} == {"cuda"}
    assert all(c.id.startswith("cuda/") and c.workload.device == "cuda" for c in suite.cases)
    assert {sku for sku, _ in suite.torch_batches} == {"cuda"}
    # In-process blocks (a CUDA context does not survive fork), warmed up for a time.
    sku = suite.sku("cuda")
    assert sku["torch"]["threads"] == 1
    m = sku["measurement"]
    assert (m["torch_warmup_s"], m["torch_min_run_time_s"], m["invocations"],
            m["max_invocations"]) == (0.05, 0.1, 10, 14)


def test_a_file_mixing_devices_gets_both_skus_each_entry_on_its_own():
    assert devices_of(MIXED_FILE) == ["cuda", "cuda", "cpu"]
    suite = load([MIXED_FILE])
    assert set(suite.config["skus"]) == {"cpu-host", "cuda"}
    by_sku: dict[str, set[str]] = {}
    for case in suite.cases:
        by_sku.setdefault(case.sku, set()).add(case.workload.device)
    assert by_sku == {"cuda": {"cuda"}, "cpu-host": {"cpu"}}
    # No entry is measured twice: each case once, on its device's SKU.
    assert len(suite.cases) == len({(c.backend, c.workload.id, c.recipe) for c in suite.cases})
    assert suite.sku("cpu-host")["measurement"]["torch_warmup_s"] == 0.0


def test_a_cpu_file_stays_on_cpu_host():
    suite = load([CPU_FILE])
    assert list(suite.config["skus"]) == ["cpu-host"]
    assert {c.sku for c in suite.cases} == {"cpu-host"}


def test_a_file_naming_its_skus_runs_every_entry_on_each(tmp_path):
    data = yaml.safe_load(MIXED_FILE.read_text())
    data["skus"] = {"box": {"torch": {"threads": 1}}, "lab": {}}
    suite = load([write_suite(tmp_path / "own.yml", data)])
    for workload in {c.workload.id for c in suite.cases}:
        assert {c.sku for c in suite.cases if c.workload.id == workload} == {"box", "lab"}


# Issue 46, item 2: a SKU's name never decides a device, and never misfiles one. An
# entry's torch cases run on its own device; a SKU named for another device (the names
# device_sku gives) would report them, and send them to the dashboard, as that device's.
def test_a_cpu_entry_is_never_filed_under_a_sku_named_cuda(tmp_path):
    data = yaml.safe_load(MIXED_FILE.read_text())
    data["skus"] = {"cuda": {"torch": {"threads": 1}}}
    path = write_suite(tmp_path / "t.yml", data)
    with pytest.raises(ConfigError) as err:
        load([path])
    (line,) = err.value.problems  # only the cpu entry, model_params[2]
    assert line == (f"{path}: model_params[2].device: its cpu torch cases would be measured "
                    "and reported under SKU 'cuda', whose name says cuda; expected SKUs named "
                    "for where their cases run: add a SKU cpu-host to the file's skus for its "
                    "cpu entries, or rename SKU 'cuda' (e.g. after the machine)")
    # Either fix: a SKU for the CPU entries (each entry then on its own device's SKU) ...
    data["skus"]["cpu-host"] = {}
    suite = load([write_suite(tmp_path / "t.yml", data)])
    assert {(c.sku, c.workload.device) for c in suite.cases} == {("cuda", "cuda"),
                                                                  ("cpu-host", "cpu")}
    # ... or a name that claims no device, which holds every entry, each on its device.
    data["skus"] = {"h100-box": {}}
    suite = load([write_suite(tmp_path / "t.yml", data)])
    assert {c.workload.device for c in suite.cases if c.sku == "h100-box"} == {"cpu", "cuda"}


@pytest.mark.parametrize("skus, workload, bad", [
    # A workload crossing every SKU: its torch cases on cuda (cpu) are misfiled.
    ({"cpu-host": {}, "cuda": {}}, {"backends": ["torch-eager"]}, "'cuda', whose name says cuda"),
    # A cuda workload on the default suite's cpu-host.
    ({"cpu-host": {}}, {"backends": ["torch-eager"], "device": "cuda"},
     "'cpu-host', whose name says cpu"),
    ({"mps": {}}, {"backends": ["iree", "torch-eager"], "skus": ["mps"]},
     "'mps', whose name says mps"),
])
def test_a_workloads_torch_cases_are_never_filed_under_another_devices_name(
        tmp_path, skus, workload, bad):
    data = {"skus": skus, "workloads": [{"model": "linear", "shapes": [[16, 32, 32]],
                                         **workload}]}
    with pytest.raises(ConfigError) as err:
        load([write_suite(tmp_path / "s.yml", data)])
    (line,) = err.value.problems
    assert "workloads[0].skus: its " in line and f"under SKU {bad}" in line
    assert "list the entry's skus without" in line


@pytest.mark.parametrize("skus, workload", [
    # IREE cases run where the SKU's iree section says, whatever the workload's device.
    ({"cuda": {"iree": {"target_backend": "cuda", "target_chip": "sm_80", "device": "cuda"}}},
     {"backends": ["iree"]}),
    ({"cpu-host": {}}, {"backends": ["iree"], "device": "cuda"}),
    # Names that claim no device hold every device's cases.
    ({"gpu": {}, "host": {}}, {"backends": ["torch-eager"], "device": "cuda"}),
    ({"cuda": {}}, {"backends": ["torch-eager"], "device": "cuda"}),
])
def test_names_that_agree_or_claim_nothing_are_fine(tmp_path, skus, workload):
    data = {"skus": skus, "workloads": [{"model": "linear", "shapes": [[16, 32, 32]],
                                         **workload}]}
    assert load([write_suite(tmp_path / "s.yml", data)]).cases


@pytest.mark.parametrize("params, skus", [
    ([{"device": "cuda"}, {"device": "cpu"}, {}], ["cpu-host", "cuda"]),
    ({"device": "xpu"}, ["xpu"]),
    ([], ["cpu-host"]),
    ([{"device": "tpu"}], ["cpu-host"]),  # refused by the schema, which names it
    ("not a list", ["cpu-host"]),
])
def test_the_skus_a_file_gets_follow_its_devices(params, skus):
    assert sorted(torchao.with_torchao_skus({"model_params": params})["skus"]) == skus


def test_a_refused_device_is_the_schemas_problem_not_a_sku():
    from workflow.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        validate_suite({"model_params": [{"device": "tpu"}]}, "t.yml")
    assert any("model_params" in p and "tpu" in p for p in err.value.problems)


def test_an_entry_whose_device_is_not_a_string_is_refused_naming_it(tmp_path):
    """Found by tests/test_fuzz.py: `device: []` raised TypeError while the SKUs were
    made from the entries' devices, before validation could say what was wrong."""
    data = yaml.safe_load(CPU_FILE.read_text())
    data["model_params"][0]["device"] = []
    with pytest.raises(ConfigError, match=r"model_params\[0\]\.device"):
        load([write_suite(tmp_path / "t.yml", data)])
