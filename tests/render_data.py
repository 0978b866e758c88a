"""Inputs of the renderer tests.

tests/data/report_iree.json and report_torch.json are real reports: snakemake runs of
small suites on the 2-core CI machine (IREE on two SKUs with a 2 x 2 linear shape sweep
and a model IREE cannot compile; IREE, torch-eager and torch-inductor with the baseline
and int8wo recipes). `with_synthetic_verdicts` derives from a real report what no small
real run produces on demand; everything it changes is marked SYNTHETIC in the case's
provenance.
"""

from __future__ import annotations

import copy
import json
import statistics

from tests.conftest import DATA
from workflow.backends.torch import recipes
from workflow.records.case import unsupported_case
from workflow.stats.speedup import fill_speedups

PEAK = {"gflops": 100.0, "dtype": "f32", "method": "test peak", "measured_at": "test"}


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def iree_report() -> dict:
    return load("report_iree.json")


def torch_report() -> dict:
    return load("report_torch.json")


def find(report: dict, case_id: str) -> dict:
    return next(c for c in report["cases"] if c["id"] == case_id)


def with_synthetic_verdicts(report: dict) -> dict:
    """A copy of `report` where one ok case has a golden time regression, one a PCC
    below its threshold and one a binary size regression (SYNTHETIC: a renderer input,
    not a measurement)."""
    out = copy.deepcopy(report)
    ok = sorted((c for c in out["cases"] if c["status"] == "ok"), key=lambda c: c["id"])
    regressed, inaccurate, bigger = ok[0], ok[1], ok[2]
    median = regressed["timing"]["median_ms"]
    regressed["golden"].update(verdict="regression", value_ms=median / 1.3, tolerance=1.1,
                               ratio=1.3, p_value=0.012)
    inaccurate["accuracy"].update(pcc=0.95, accurate=False)
    bigger["golden"]["size_verdict"] = "regression"
    for case in (regressed, inaccurate, bigger):
        case["provenance"]["synthetic"] = "SYNTHETIC verdict for renderer tests"
    return out


TRAIN = "linear-64x64x64-f32-train"
# What the training cases of `with_training` derive from: (backend, its kind, recipe).
TRAINING_SIDES = (("torch-eager", "eager", "baseline"), ("torch-inductor", "inductor", "baseline"),
                  ("torch-eager", "eager", "int8wo"), ("iree", "iree", "baseline"))


def with_training(report: dict) -> dict:
    """A copy of the torch report plus the training cases of linear 64x64x64 (SYNTHETIC:
    renderer inputs): torch-eager and torch-inductor baseline steps, the inference cases'
    measurements renamed (the eager one quiet, CV 3.1 %, not noisy); torch-eager int8wo
    and IREE baseline unsupported, with the reasons the recipes give. Speedups refilled."""
    out = copy.deepcopy(report)
    for backend, kind, recipe in TRAINING_SIDES:
        src = find(out, f"host/{backend}/linear-64x64x64-f32/{recipe}")
        identity = {**src, "id": f"host/{backend}/{TRAIN}/{recipe}", "workload": TRAIN,
                    "mode": "training"}
        why = recipes.static_reason(recipes.parse(recipe), backend_kind=kind, mode="training")
        if why:
            out["cases"].append(unsupported_case(identity, why))
            continue
        case = copy.deepcopy(identity)  # shares nothing with its inference case
        case["timing"]["phases_ms"] = {"forward": 1.0, "backward": 2.0, "optimizer": 0.5}
        if backend == "torch-eager":
            case["timing"].update(cv=0.031, noisy=False)
        case["provenance"]["synthetic"] = "SYNTHETIC training case for renderer tests"
        out["cases"].append(case)
    fill_speedups(out["cases"])
    return out


def median_of_invocations(case: dict) -> float:
    """The case's median recomputed from its raw invocation medians."""
    return statistics.median(case["timing"]["invocation_medians_ms"])
