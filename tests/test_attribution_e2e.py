"""End-to-end (issue 25, "Done when"): two runs of one case id through Snakemake, then
`benchflow compare` names the dispatches behind the change from the records' `kernels`.

- a flag that changes fusion: ln_linear_gelu on a local-sync SKU, once with the default
  flags and once with --iree-dispatch-creation-enable-aggressive-fusion (the same SKU
  name, the suite changed between the runs: the same case id). Three dispatches become
  two; from aggressive to default one is added. The time may move either way or not at
  all, so compare names the added dispatch whatever the verdict (regression/explain.py:
  a changed dispatch set is said even for a Similar row).
- a workload whose one matmul grows: a user model (model_modules) whose second layer's
  width is written into its source by the test, same model name and shape, so the same
  case id; the grown matmul's dispatch is the row that explains most of the slowdown.
- a torch recipe change: `benchflow ab` on a pair of the baseline and int8wo names the
  aten ops the recipe added and removed (each side profiled in its A/B worker).

Each run is one workdir; the two reports are compared as a user would.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import FAST_MEASUREMENT, snakemake, write_suite
from tests.model_sources import growing_model
from workflow.cli.main import main

pytestmark = pytest.mark.e2e

AGGRESSIVE = "--iree-dispatch-creation-enable-aggressive-fusion"
# Four invocations: the fewest with which compare's Mann-Whitney on 4 vs 4 invocation
# medians can reach p < 0.05 (1/70; 3 vs 3 cannot: 1/20).
MEASURE = {**FAST_MEASUREMENT, "invocations": 4, "max_invocations": 4, "noisy_cv": 5.0,
           "profile_calls": 5}


def run(wd, workloads, flags=(), model_modules=()):
    suite = {"suite_name": "attr",
             "skus": {"sync": {"iree": {"target_cpu": "generic", "device": "local-sync",
                                        "compile_flags": list(flags)},
                               "measurement": dict(MEASURE)}},
             "workloads": workloads, "model_modules": list(model_modules)}
    wd.mkdir(exist_ok=True)
    write_suite(wd / "suite.yaml", suite)
    snakemake(wd, "results/report.json", "--configfile", str(wd / "suite.yaml"))
    return wd / "results" / "report.json"


def compared(base, new, capsys) -> tuple[dict, str]:
    """compare's JSON row of the one case, and its Markdown."""
    capsys.readouterr()
    assert main(["compare", str(base), str(new), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (row,) = [r for rows in data["sections"].values() for r in rows]
    assert main(["compare", str(base), str(new)]) == 0
    return row, capsys.readouterr().out


def kernels(report) -> dict:
    (case,) = json.loads(report.read_text())["cases"]
    assert case["status"] == "ok", case["error"]
    k = case["kernels"]
    assert k and k["source"] == "iree-profile" and k["error"] is None, k
    return k


def test_a_fusion_flag_names_the_added_dispatch(tmp_path, capsys):
    gelu = [{"model": "ln_linear_gelu", "shapes": [[64, 128, 128]]}]
    aggressive = run(tmp_path / "aggressive", gelu, [AGGRESSIVE])
    default = run(tmp_path / "default", gelu)
    assert len(kernels(aggressive)["rows"]) == 2 and len(kernels(default)["rows"]) == 3
    row, md = compared(aggressive, default, capsys)
    added = row["attribution"]["added"]
    assert len(added) == 1 and "reduction" in added[0], row
    assert row["attribution"]["removed"] == []
    assert row["why"][-1] == f"added: {added[0]}"
    assert f"compile flags: - {AGGRESSIVE}" in row["changed"]
    assert f"added: {added[0]}" in md.replace("\\", "")
    print("\n".join([f"{row['section']} {row['id']} {row['change']:+.1%}", *row["why"],
                     row["what_changed"]]))


GROWING = growing_model("two_matmuls", (64, 128))


def test_a_grown_matmul_is_named_as_most_of_the_change(tmp_path, capsys):
    # As a user would: one suite, its model file edited between two runs (the second
    # measures again, its content key changed), the first run's report kept aside.
    wd, before = tmp_path / "w", tmp_path / "before.json"
    wd.mkdir()
    model = wd / "growing.py"
    model.write_text(GROWING.format(width=128))
    workloads = [{"model": "two_matmuls", "shapes": [[64, 128]]}]
    before.write_text(run(wd, workloads, model_modules=["growing.py"]).read_text())
    model.write_text(GROWING.format(width=2048))
    after = run(wd, workloads, model_modules=["growing.py"])
    row, md = compared(before, after, capsys)
    assert row["section"] == "Regressed", row
    top = row["attribution"]["rows"][0]
    assert "matmul" in top["name"] and "2048" in top["name"], top
    assert top["explains"] > 0.5, top
    assert "explains" in row["why"][0] and "2048" in row["why"][0]
    # The records hold their model's source files by digest: the diff names the edited one.
    assert re.fullmatch(rf"what changed: model source {re.escape(str(model.resolve()))}: "
                        "[0-9a-f]{16} -> [0-9a-f]{16}", row["what_changed"]), row
    assert "explains" in md
    print("\n".join([f"{row['section']} {row['id']} {row['change']:+.1%}", *row["why"],
                     row["what_changed"]]))


TORCH_MEASURE = {"invocations": 2, "max_invocations": 2, "disturbed_share": 1.0,
                 "repetitions": 3, "min_warmup_time_s": 0.05, "min_time_s": 0.01,
                 "noisy_cv": 10.0, "rerun_noisy": False, "torch_warmup_calls": 2,
                 "torch_warmup_s": 0.0, "torch_min_run_time_s": 0.02}


def test_a_torch_recipe_change_names_the_aten_ops_that_changed(tmp_path, capsys):
    """A recipe is part of a torch case's id, so a recipe change is judged as an A/B pair
    of the baseline and the recipe on one workload: `benchflow ab` through Snakemake, each
    side's long-lived worker profiled per aten op after the rounds. A short plan (8 rounds
    at most): the verdict may stay inconclusive; the explanation is the point: the ops
    the recipe brought in and took out, and the recipe named as what changed."""
    suite = {"suite_name": "attr-torch",
             "skus": {"host": {"torch": {"threads": 1}, "measurement": TORCH_MEASURE}},
             "backends": ["torch-eager"], "recipes": ["baseline", "int8wo"],
             "workloads": [{"model": "linear", "shapes": [[16, 256, 256]]}],
             "ab_pairs": [{"base": {"sku": "host", "backend": "torch-eager"},
                           "new": {"sku": "host", "backend": "torch-eager",
                                   "recipe": "int8wo"}}],
             "ab": {"max_rounds": 8, "torch_block_s": 0.05, "torch_worker_rounds": 8}}
    write_suite(tmp_path / "suite.yaml", suite)
    code = main(["ab", "--configfile", str(tmp_path / "suite.yaml"), "--cores", "2",
                 "--directory", str(tmp_path)])
    out = capsys.readouterr().out
    (row,) = json.loads((tmp_path / "results" / "ab.json").read_text())["pairs"]
    assert row["verdict"] != "failed" and code in (0, 1, 3), (code, row.get("error"))
    for side in ("base", "new"):
        k = row["kernels"][side]
        assert k["source"] == "torch.profiler" and k["error"] is None and k["rows"], k
    a = row["attribution"]["attribution"]
    print("\n".join([*row["attribution"]["lines"], row["attribution"]["what_changed"]]))
    # int8 weight-only on the CPU in eager (torchao 0.18): the weight is converted per call
    # (a cast, a copy and the scale's multiply) and aten::linear (nn.Linear's) is gone;
    # the matmul itself is in both.
    assert {"aten::_to_copy", "aten::mul"} <= set(a["added"]), a
    assert "aten::linear" in a["removed"], a
    assert all(n.startswith("aten::") for n in (*a["added"], *a["removed"]))
    assert row["attribution"]["what_changed"] == "what changed: recipe baseline -> int8wo"
    # benchflow ab prints them under the row's line.
    assert "what changed: recipe baseline -> int8wo" in out and "aten::" in out, out
