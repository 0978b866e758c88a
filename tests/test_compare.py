"""`benchflow compare`: sections, rows, sorting, the geometric mean, both formats."""

import json
import math

import pytest

from tests.test_goldens import BASE, make_case, make_report
from workflow.cli.main import main
from workflow.records.storage import write_json
from workflow.regression.compare import compare, to_json, to_markdown


def scaled(k):
    return [k * x for x in BASE]


@pytest.fixture
def reports(tmp_path):
    base = make_report(
        make_case("host/iree/slow2x/baseline", BASE),
        make_case("host/iree/slow30/baseline", BASE),
        make_case("host/iree/fast/baseline", BASE),
        make_case("host/iree/same/baseline", BASE),
        make_case("host/iree/noisy/baseline", BASE),
        make_case("host/iree/gone/baseline", BASE),
        make_case("host/iree/broke/baseline", BASE), sha="base111")
    new = make_report(
        make_case("host/iree/slow2x/baseline", scaled(2.0), dispatch=3),
        make_case("host/iree/slow30/baseline", scaled(1.3)),
        make_case("host/iree/fast/baseline", scaled(0.5)),
        make_case("host/iree/same/baseline", scaled(1.02)),
        # Noisy, and its range overlaps what the base's spread x 1.1 allows: inconclusive.
        make_case("host/iree/noisy/baseline", [1.05, 1.4, 1.45, 1.5, 1.6], noisy=True),
        make_case("host/iree/broke/baseline", BASE, status="failed"),
        make_case("host/iree/added/baseline", BASE), sha="new222")
    b, n = tmp_path / "base.json", tmp_path / "new.json"
    write_json(b, base)
    write_json(n, new)
    return b, n


def test_sections_sorted_by_change_with_geometric_mean(reports):
    base, new = (json.loads(p.read_text()) for p in reports)
    result = compare(base, new)
    sections = {name: [r.id.split("/")[2] for r in rows]
                for name, rows in result["sections"].items()}
    assert sections == {"Regressed": ["slow2x", "slow30"], "Improved": ["fast"],
                        "Similar": ["noisy", "same"]}
    expected = math.exp(sum(map(math.log, [2.0, 1.3, 0.5, 1.02, 1.45])) / 5)
    assert result["geomean_ratio"] == pytest.approx(expected)
    assert dict(result["unmatched"]) == {
        "host/iree/added/baseline": "only in new", "host/iree/gone/baseline": "only in base",
        "host/iree/broke/baseline": "new: failed at compile"}


def test_markdown_is_ready_for_a_pull_request(reports):
    md = to_markdown(compare(*(json.loads(p.read_text()) for p in reports)))
    assert md.startswith("## Benchmark comparison")
    assert "base `base111`" in md and "new `new222`" in md
    assert md.index("### Regressed (2)") < md.index("### Improved (1)") < md.index(
        "### Similar (2)")
    assert ("| `host/iree/slow2x/baseline` | 2 ms (vs. 1 ms, +100.0%) | 0.00397 | "
            "dispatches 2 -> 3 |") in md
    assert "| `host/iree/fast/baseline` | 0.5 ms (vs. 1 ms, -50.0%) | 0.00397 |  |" in md
    assert "noisy, inconclusive" in md
    assert md.index("slow2x") < md.index("slow30")
    geo = math.exp(sum(map(math.log, [2.0, 1.3, 0.5, 1.02, 1.45])) / 5)
    assert f"| **geometric mean (5 cases)** | ×{geo:.4f} ({geo - 1:+.1%}) |" in md
    assert "- `host/iree/gone/baseline`: only in base" in md


def test_cli_reports_and_exits_0_in_both_formats(reports, capsys):
    assert main(["compare", *map(str, reports)]) == 0
    assert "### Regressed (2)" in capsys.readouterr().out
    assert main(["compare", *map(str, reports), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["sections"]["Regressed"]
    assert [r["id"] for r in rows] == ["host/iree/slow2x/baseline", "host/iree/slow30/baseline"]
    assert rows[0]["change"] == pytest.approx(1.0) and rows[0]["p_value"] < 0.05
    assert data["compared"] == 5 and data["settings"]["tolerance"] == 1.1
    # A looser tolerance moves the 1.3x case to Similar.
    assert main(["compare", *map(str, reports), "--format", "json", "--tolerance", "1.5"]) == 0
    assert len(json.loads(capsys.readouterr().out)["sections"]["Regressed"]) == 1


def test_json_has_every_row_field():
    base = make_report(make_case("h/iree/a/baseline", BASE))
    out = to_json(compare(base, base))
    (row,) = out["sections"]["Similar"]
    assert set(row) == {"id", "base_ms", "new_ms", "ratio", "p_value", "section", "note",
                        "change", "attribution", "why", "changed", "what_changed", "basis",
                        "pair"}
    assert row["ratio"] == 1.0 and out["geomean_ratio"] == 1.0
    # A Similar row whose dispatch set did not change carries no explanation.
    assert row["attribution"] is None and not row["why"] and not row["changed"]


def test_a_case_without_a_stage_is_named_by_its_status_alone():
    """A compile-only case ends at no stage: `compile-only`, never `compile-only at
    None`; nor does the gate's reason for it say None."""
    from workflow.stats.verdict import GoldenRef, judge
    from workflow.suite.defaults import gate_settings

    cid = "gpu/iree/lin/baseline"
    only = make_case(cid, BASE, status="compile-only", stage=None)
    result = compare(make_report(make_case(cid, BASE)), make_report(only))
    assert dict(result["unmatched"]) == {cid: "new: compile-only"}
    assert "None" not in to_markdown(result)
    golden = judge(only, GoldenRef(median_ms=1.0, source="g/gpu.json"),
                   gate_settings())
    assert golden["reason"] == "case compile-only: the golden has a time"


def paired_basis(speedup: float, ci: tuple[float, float], row="baseline -> int8wo on w"):
    return {"vs_baseline": {"kind": "paired", "ratio": speedup, "ci95": list(ci),
                            "level": 0.95, "ab_row": row, "base_id": "s/torch/w/baseline",
                            "rounds": 20, "verdict": "no-difference"}}


def test_two_runs_are_labelled_cross_run_and_a_pair_in_both_decides(capsys, tmp_path):
    """Unchanged code whose second run sat x1.6 slower as a whole: by the medians a
    regression (p=0.004), but both runs measured the case against its baseline in
    A/B pairs, and the pairs agree: Similar, decided by the pairs. A case the pairs
    show 1.3x slower relative to its partner is Regressed by them. Without pairs the
    verdict stays the medians', labelled cross-run in the header and the JSON."""
    cid, moved = "s/torch/w/int8wo", "s/torch/v/int8wo"
    base = make_report(
        make_case(cid, BASE, speedup={"vs_baseline": 2.0,
                                      "basis": paired_basis(2.0, (1.96, 2.04))}),
        make_case(moved, BASE, speedup={"vs_baseline": 2.0, "basis": paired_basis(
            2.0, (1.96, 2.04), "baseline -> int8wo on v")}),
        make_case("s/torch/u/int8wo", BASE), sha="a1")
    new = make_report(
        make_case(cid, scaled(1.6), speedup={"vs_baseline": 2.01,
                                             "basis": paired_basis(2.01, (1.97, 2.05))}),
        make_case(moved, scaled(1.6), speedup={"vs_baseline": 2.0 / 1.3, "basis": paired_basis(
            2.0 / 1.3, (1.51, 1.57), "baseline -> int8wo on v")}),
        make_case("s/torch/u/int8wo", scaled(1.6)), sha="b2")
    result = compare(base, new)
    rows = {r.id: r for rows in result["sections"].values() for r in rows}
    assert result["basis"] == "cross-run" and result["paired_rows"] == 2
    assert rows[cid].section == "Similar" and rows[cid].basis == "paired"
    assert rows[cid].pair["ratio"] == pytest.approx(2.0 / 2.01)
    lo, hi = rows[cid].pair["ci95"]
    assert lo < 1 < hi
    assert rows[moved].section == "Regressed" and rows[moved].ratio == pytest.approx(1.3)
    assert rows["s/torch/u/int8wo"].section == "Regressed"
    assert rows["s/torch/u/int8wo"].basis == "cross-run"
    md = to_markdown(result)
    assert "**Cross-run**: base and new are two runs" in md
    assert "2 row(s) marked *paired*" in md
    assert f"| `{moved}` | 1.6 ms (vs. 1 ms); +30.0% relative to baseline | paired [" in md
    b, n = tmp_path / "b.json", tmp_path / "n.json"
    write_json(b, base)
    write_json(n, new)
    assert main(["compare", str(b), str(n), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["basis"] == "cross-run"
    assert {r["id"]: r["basis"] for r in data["sections"]["Regressed"]} == {
        moved: "paired", "s/torch/u/int8wo": "cross-run"}
    # A pair against another partner in one run only decides nothing.
    other = make_report(make_case(cid, scaled(1.6), speedup={
        "vs_baseline": 2.0, "basis": paired_basis(2.0, (1.9, 2.1), "fp32 -> int8wo on w")}))
    assert compare(base, other)["sections"]["Regressed"][0].basis == "cross-run"
