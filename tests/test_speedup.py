import copy

import pytest

from tests.render_data import load
from workflow.records import schemas
from workflow.records.report import report_schema, validate_report
from workflow.stats.speedup import CROSS_RUN, KEYS, PAIRED, fill_paired, fill_speedups


def case(backend, recipe, ms, workload="w", status="ok", at=None):
    return {"id": f"s/{backend}/{workload}/{recipe}", "sku": "s", "backend": backend,
            "workload": workload, "recipe": recipe, "status": status,
            "timing": {"median_ms": ms, "measured_at": at} if ms else None}


def floats(speedup: dict) -> dict:
    return {k: speedup[k] for k in KEYS}


def test_speedups_are_baseline_time_over_case_time():
    cases = [case("torch-eager", "baseline", 4.0), case("torch-eager", "int8wo", 2.0),
             case("torch-inductor", "baseline", 1.0), case("torch-inductor", "int8wo", 0.5),
             case("iree", "baseline", 8.0), case("torch-eager", "int8wo", 1.0, workload="x")]
    fill_speedups(cases)
    eager_q, ind_base, ind_q, iree = (floats(cases[i]["speedup"]) for i in range(1, 5))
    assert eager_q == {"vs_baseline": 2.0, "vs_eager": None}
    assert ind_base == {"vs_baseline": None, "vs_eager": 4.0}
    assert ind_q == {"vs_baseline": 2.0, "vs_eager": 4.0}
    assert iree == {"vs_baseline": None, "vs_eager": 0.5}
    assert floats(cases[5]["speedup"]) == {"vs_baseline": None, "vs_eager": None}  # no base
    assert cases[5]["speedup"]["basis"] == {"vs_baseline": None, "vs_eager": None}


def test_every_speedup_says_it_is_cross_run_with_both_sides_and_their_times():
    cases = [case("torch-eager", "baseline", 4.0, at="2026-01-01T10:00:00+00:00"),
             case("torch-inductor", "baseline", 1.0, at="2026-01-01T10:05:00+00:00"),
             case("iree", "baseline", 2.0)]
    cases[2]["provenance"] = {"started_at": "2026-01-01T09:00:00+00:00"}
    fill_speedups(cases)
    assert cases[1]["speedup"]["basis"] == {"vs_baseline": None, "vs_eager": {
        "kind": CROSS_RUN, "base_ms": 4.0, "case_ms": 1.0,
        "base_id": "s/torch-eager/w/baseline", "base_measured_at": "2026-01-01T10:00:00+00:00",
        "case_measured_at": "2026-01-01T10:05:00+00:00"}}
    # No timing.measured_at: the case's provenance.started_at stands in for it.
    assert cases[2]["speedup"]["basis"]["vs_eager"]["case_measured_at"] == \
        "2026-01-01T09:00:00+00:00"
    assert cases[0]["speedup"]["basis"] == {"vs_baseline": None, "vs_eager": None}


def ab_row(base_backend, base_recipe, new_backend, new_recipe, ratio, ci, new_sku="s",
           new_workload="w"):
    """A torch A/B row (ab.schema.json: kind torch, its sides' sku, backend, recipe and
    workload); the labels `base` and `new` are not read."""
    sides = {"base": {"sku": "s", "backend": base_backend, "recipe": base_recipe,
                      "workload": "w"},
             "new": {"sku": new_sku, "backend": new_backend, "recipe": new_recipe,
                     "workload": new_workload}}
    return {"base": "label", "new": "label", "workload": "w", "kind": "torch",
            "sides": sides, "verdict": "improvement", "ratio": ratio, "ci95": ci,
            "level": 0.97, "rounds": 12}


def test_a_paired_row_fills_the_speedup_it_measured_inverted():
    cases = [case("torch-eager", "baseline", 4.0), case("torch-eager", "int8wo", 2.0),
             case("torch-inductor", "int8wo", 1.0), case("torch-inductor", "baseline", 1.0)]
    fill_speedups(cases)
    rows = [ab_row("torch-eager", "baseline", "torch-eager", "int8wo", 0.5, [0.4, 0.625]),
            ab_row("torch-eager", "int8wo", "torch-inductor", "int8wo", 0.25, None)]
    assert fill_paired(cases, rows) == 2
    q = cases[1]["speedup"]
    assert q["vs_baseline"] == 2.0  # 1 / the row's new / base
    assert q["basis"]["vs_baseline"] == {
        "kind": PAIRED, "ratio": 2.0, "ci95": [1.6, 2.5], "level": 0.97,
        "ab_row": "label -> label on w",
        "base_id": "s/torch-eager/w/baseline", "rounds": 12, "verdict": "improvement"}
    ind = cases[2]["speedup"]
    assert ind["vs_eager"] == 4.0 and ind["basis"]["vs_eager"]["ab_row"] == "label -> label on w"
    assert ind["basis"]["vs_eager"]["ci95"] is None  # the row had no 95 % interval
    # Not measured by a pair: stays cross-run.
    assert ind["basis"]["vs_baseline"]["kind"] == CROSS_RUN
    assert cases[3]["speedup"]["basis"]["vs_eager"]["kind"] == CROSS_RUN


@pytest.mark.parametrize("row", [
    # Sides that differ in more than the one thing a speedup compares.
    ab_row("torch-eager", "baseline", "torch-inductor", "int8wo", 0.5, None),
    # The wrong way round: base is the case, new the baseline.
    ab_row("torch-eager", "int8wo", "torch-eager", "baseline", 0.5, None),
    # Another SKU on one side, another workload.
    ab_row("torch-eager", "baseline", "torch-eager", "int8wo", 0.5, None, new_sku="t"),
    ab_row("torch-eager", "baseline", "torch-eager", "int8wo", 0.5, None, new_workload="x"),
    # A failed row measured nothing; an IREE row (two SKUs) names no backends.
    {**ab_row("torch-eager", "baseline", "torch-eager", "int8wo", 0.5, None),
     "verdict": "failed", "ratio": None},
    {"base": "s", "new": "s", "workload": "w", "verdict": "no-difference", "ratio": 1.0,
     "ci95": [0.99, 1.01]},
])
def test_rows_that_do_not_measure_a_speedup_leave_it_cross_run(row):
    cases = [case("torch-eager", "baseline", 4.0), case("torch-eager", "int8wo", 2.0)]
    fill_speedups(cases)
    assert fill_paired(cases, [row]) == 0
    assert cases[1]["speedup"]["vs_baseline"] == 2.0
    assert cases[1]["speedup"]["basis"]["vs_baseline"]["kind"] == CROSS_RUN


def test_the_kinds_are_the_schemas_and_a_paired_basis_is_valid():
    kinds = [b["properties"]["kind"]["const"]
             for b in report_schema()["$defs"]["speedup_basis"]["oneOf"][1:]]
    assert kinds == [CROSS_RUN, PAIRED]
    cases = [case("torch-eager", "int8wo", 2.0)]  # its baseline is not in the report
    fill_paired(cases, [ab_row("torch-eager", "baseline", "torch-eager", "int8wo", 0.5,
                               [0.4, 0.625])])
    basis = cases[0]["speedup"]["basis"]["vs_baseline"]
    assert basis["kind"] == PAIRED and basis["base_id"] is None
    one = {"$defs": report_schema()["$defs"], "$ref": "#/$defs/speedup_basis"}
    schemas.validator(one).validate(basis)
    # The rows read are ab.json's: each side as ab.schema.json's torch_side has it.
    side = {"$defs": schemas.load("ab")["$defs"], "$ref": "#/$defs/torch_side"}
    for s in ab_row("torch-eager", "baseline", "torch-eager", "int8wo", 1, None)["sides"].values():
        schemas.validator(side).validate(s)


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
                assert again["speedup"]["basis"][key]["kind"] == CROSS_RUN
                filled += 1
    assert filled >= (4 if name == "report_torch.json" else 0)
    validate_report({**report, "cases": blank})  # the bases are the schema's
