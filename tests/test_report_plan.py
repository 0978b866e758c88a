"""What the reports' jobs are planned from (issue 45, item 9 and item 8's title): the CPU
peak is measured only for a suite that times a case on the CPU, and a suite that names
none is called after its file in its reports, not 'default'."""

from __future__ import annotations

import pytest

from tests.conftest import snakemake, tiny_suite, write_suite
from workflow.paths import PEAK
from workflow.planning.plan import peak_input
from workflow.planning.suite_dir import SuiteIdentity
from workflow.suite.load import load

# Every case unsupported: a torchao recipe the IREE backend cannot run.
NOTHING_TIMED = {"skus": {"host": {"iree": {"target_cpu": "host"}}},
                 "workloads": [{"model": "linear", "shapes": [[16, 32, 32]],
                                "backends": ["iree"], "recipes": ["int8wo"]}]}
CUDA_SKU = {"iree": {"target_backend": "cuda", "target_chip": "sm_80", "device": "cuda"}}


@pytest.mark.parametrize("suite, measured", [
    (NOTHING_TIMED, False),
    # Compile-only here or timed on a GPU: no CPU time to compare with a CPU peak.
    ({**NOTHING_TIMED, "skus": {"gpu": CUDA_SKU},
      "workloads": [{"model": "linear", "shapes": [[16, 32, 32]]}]}, False),
    ({**NOTHING_TIMED, "workloads": [{"model": "linear", "shapes": [[16, 32, 32]],
                                      "backends": ["torch-eager"], "device": "cuda"}]}, False),
    (tiny_suite(), True),
    ({**NOTHING_TIMED, "workloads": [{"model": "linear", "shapes": [[16, 32, 32]],
                                      "backends": ["torch-eager"]}]}, True),
], ids=["all-unsupported", "iree-cuda", "torch-cuda", "iree-cpu", "torch-cpu"])
def test_the_peak_is_an_input_only_where_a_case_is_timed_on_the_cpu(tmp_path, suite, measured):
    loaded = load([write_suite(tmp_path / "s.yaml", suite)])
    assert peak_input(loaded) == ([PEAK] if measured else [])


def test_a_suite_that_names_none_is_called_after_its_file():
    unnamed = SuiteIdentity(None, ("/x/config/nothing_timed.yaml",))
    assert unnamed.report_name("default") == "nothing_timed"
    assert unnamed.report_name("from-config") == "from-config"  # --config suite_name=...
    assert SuiteIdentity("default", ("/r/config/config.yaml",)).report_name("default") \
        == "default"


@pytest.mark.e2e
def test_a_run_that_times_nothing_measures_no_peak(tmp_path):
    """`snakemake all` of a suite whose every case is unsupported makes its reports without
    measure_peak, titled after the suite's file; a suite with a CPU case plans it."""
    suite = write_suite(tmp_path / "nothing_timed.yaml", NOTHING_TIMED)
    proc = snakemake(tmp_path, "all", "--configfile", str(suite))
    assert "measure_peak" not in proc.stdout + proc.stderr
    results = tmp_path / "results"
    assert not (results / "peak.json").exists() and (results / "report.html").exists()
    assert "<title>benchflow report: nothing_timed</title>" in (results / "report.html").read_text()
    assert "# benchflow report: nothing_timed\n" in (results / "report.md").read_text()
    timed = write_suite(tmp_path / "timed.yaml", tiny_suite())
    plan = snakemake(tmp_path / "other", "all", "-n", "--configfile", str(timed))
    assert "measure_peak" in plan.stdout + plan.stderr
