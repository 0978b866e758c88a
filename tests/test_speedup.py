import copy

import pytest

from tests.render_data import load
from workflow.stats.speedup import fill_speedups


def case(backend, recipe, ms, workload="w", status="ok"):
    return {"sku": "s", "backend": backend, "workload": workload, "recipe": recipe,
            "status": status, "timing": {"median_ms": ms} if ms else None}


def test_speedups_are_baseline_time_over_case_time():
    cases = [case("torch-eager", "baseline", 4.0), case("torch-eager", "int8wo", 2.0),
             case("torch-inductor", "baseline", 1.0), case("torch-inductor", "int8wo", 0.5),
             case("iree", "baseline", 8.0), case("torch-eager", "int8wo", 1.0, workload="x")]
    fill_speedups(cases)
    eager_q, ind_base, ind_q, iree = cases[1]["speedup"], cases[2]["speedup"], \
        cases[3]["speedup"], cases[4]["speedup"]
    assert eager_q == {"vs_baseline": 2.0, "vs_eager": None}
    assert ind_base == {"vs_baseline": None, "vs_eager": 4.0}
    assert ind_q == {"vs_baseline": 2.0, "vs_eager": 4.0}
    assert iree == {"vs_baseline": None, "vs_eager": 0.5}
    assert cases[5]["speedup"] == {"vs_baseline": None, "vs_eager": None}  # no baseline of x


def test_failed_cases_have_no_speedup_and_give_none():
    cases = [case("torch-eager", "baseline", None, status="failed"),
             case("torch-eager", "int8wo", 2.0)]
    fill_speedups(cases)
    assert cases[1]["speedup"]["vs_baseline"] is None


@pytest.mark.parametrize("name", ["report_iree.json", "report_torch.json"])
def test_reports_hold_the_speedups_fill_speedups_gives(name):
    """The renderers show a case's own speedup section (workflow.render.common.speedups):
    refilling it from scratch gives the same numbers, so nothing is lost by not
    recomputing them there."""
    report = load(name)
    blank = copy.deepcopy(report["cases"])
    for c in blank:
        c["speedup"] = {}
    fill_speedups(blank)
    filled = 0
    for own, again in zip(report["cases"], blank, strict=True):
        for key in ("vs_baseline", "vs_eager"):
            if own["speedup"][key] is None:
                assert again["speedup"][key] is None, own["id"]
            else:
                assert again["speedup"][key] == pytest.approx(own["speedup"][key], rel=1e-12)
                filled += 1
    assert filled >= (4 if name == "report_torch.json" else 0)
