"""End-to-end torch runs: 2 recipes x 2 backends x 3 shapes, and a torchao file."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.conftest import DATA, snakemake, write_suite
from workflow.records.report import report_schema

pytestmark = pytest.mark.e2e

# Two invocations keep CI short: each is a fresh process per batch (torch import and,
# for inductor, a compile of every case).
FAST = {"invocations": 2, "max_invocations": 2, "repetitions": 3, "min_warmup_time_s": 0.05,
        "min_time_s": 0.01, "rerun_noisy": False, "torch_warmup_calls": 3, "torch_warmup_s": 0.01,
        "torch_min_run_time_s": 0.05, "disturbed_share": 1.0}  # conftest.FAST_MEASUREMENT: why


def report(workdir):
    data = json.loads((workdir / "results" / "report.json").read_text())
    jsonschema.Draft202012Validator(report_schema()).validate(data)
    return {c["id"]: c for c in data["cases"]}


def test_two_recipes_two_backends_three_shapes(tmp_path):
    suite = {"skus": {"host": {"torch": {"threads": 2}, "measurement": FAST}},
             "backends": ["torch-eager", "torch-inductor"], "recipes": ["baseline", "int8wo"],
             "workloads": [{"model": "linear", "shapes": [[16, 64, 64], [32, 64, 64],
                                                          [32, 128, 64]]},
                           {"model": "mlp", "shapes": [[8, 32, 64]], "modes": ["training"],
                            "backends": ["torch-eager"], "recipes": ["baseline"]}]}
    write_suite(tmp_path / "suite.yaml", suite)
    snakemake(tmp_path, "results/report.json", "--configfile", str(tmp_path / "suite.yaml"))
    cases = report(tmp_path)
    assert len(cases) == 2 * 2 * 3 + 1
    for cid, c in cases.items():
        assert c["status"] == "ok", (cid, c["error"])
        t = c["timing"]
        assert t["invocations"] == 2 and t["median_ms"] > 0 and t["first_run_ms"] > 0
        assert c["memory"]["peak_bytes"] > 0 and c["provenance"]["torch_threads"] == 2
    for shape in ("16x64x64", "32x64x64", "32x128x64"):
        w = f"linear-{shape}-f32"
        eager_q = cases[f"host/torch-eager/{w}/int8wo"]
        base = cases[f"host/torch-eager/{w}/baseline"]
        assert eager_q["speedup"]["vs_baseline"] == pytest.approx(
            base["timing"]["median_ms"] / eager_q["timing"]["median_ms"])
        assert eager_q["accuracy"]["sqnr_db"] > 20 and base["accuracy"]["sqnr_db"] is None
        ind = cases[f"host/torch-inductor/{w}/baseline"]
        assert ind["speedup"]["vs_eager"] == pytest.approx(
            base["timing"]["median_ms"] / ind["timing"]["median_ms"])
        assert ind["compile"]["seconds"] > 0 and ind["graph"]["graph_count"] >= 1
        assert ind["graph"]["graph_breaks"] == 0 and ind["compile_mode"] == "default"
    train = cases["host/torch-eager/mlp-8x32x64-f32-train/baseline"]
    assert train["mode"] == "training"
    assert set(train["timing"]["phases_ms"]) == {"forward", "backward", "optimizer"}
    # a second run does nothing
    again = snakemake(tmp_path, "results/report.json", "--configfile",
                      str(tmp_path / "suite.yaml"))
    assert "Nothing to be done" in again.stdout + again.stderr


def test_a_torchao_microbenchmark_file_runs_unchanged(tmp_path):
    # The torchao file as it is, plus an overlay (later --configfile files win) with
    # shorter measurements.
    overlay = write_suite(tmp_path / "fast.yaml",
                          {"skus": {"cpu-host": {"torch": {"threads": 2}, "measurement": FAST}}})
    snakemake(tmp_path, "results/report.json", "--configfile",
              str(DATA / "torchao_microbenchmark.yml"), str(overlay))
    cases = report(tmp_path)
    assert len(cases) == 9
    by_recipe = {}
    for c in cases.values():
        by_recipe.setdefault(c["recipe"], []).append(c)
        assert c["group"] == "small_linear" and c["model"] == "ln_linear_sigmoid"
    assert all(c["status"] == "unsupported" and "compute capability" in c["error"]
               for c in by_recipe["float8dq-tensor"])
    for c in by_recipe["int8wo"] + by_recipe["baseline"]:
        assert c["status"] == "ok"
        assert c["profile"]["trace"] and (tmp_path / c["profile"]["trace"]).is_file()
        assert c["profile"]["memory_snapshot_status"].startswith("unsupported")
    assert all(c["speedup"]["vs_baseline"] > 0 for c in by_recipe["int8wo"])
