"""What every format shows beside a case's numbers: a measurement disturbed by outside
load (timing.disturbed, never a plain `ok`) with its reason, and what each speedup is
(cross-run with how far apart its sides were measured, or paired with its interval)."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from tests.render_data import PEAK, find, html_page, torch_report
from workflow.records.report import validate_report
from workflow.render import common as c
from workflow.render import csv_report, dashboard, html, markdown
from workflow.stats.speedup import fill_paired, fill_speedups

REASON = "3 of 6 invocations ran while other processes used 62 % of the CPUs (threshold 25 %)"
DISTURBED = "host/torch-inductor/linear-16x64x64-f32/int8wo"
PAIRED = "host/torch-inductor/linear-64x64x64-f32/int8wo"  # vs_eager from a pair
PAIRED_BASE = "host/torch-eager/linear-64x64x64-f32/int8wo"  # vs_baseline from a pair
EAGER_AT, INDUCTOR_AT = "2026-11-21T08:40:00+00:00", "2026-11-21T08:43:00+00:00"


def pair(base: tuple[str, str], new: tuple[str, str], ratio: float, ci) -> dict:
    """A torch A/B row (results/ab.json) of two sides (backend, recipe) of one workload."""
    workload = "linear-64x64x64-f32"
    sides = {role: {"sku": "host", "backend": backend, "recipe": recipe, "workload": workload}
             for role, (backend, recipe) in (("base", base), ("new", new))}
    return {"base": "+".join(sides["base"].values()), "new": "+".join(sides["new"].values()),
            "workload": workload, "kind": "torch", "sides": sides, "verdict": "improvement",
            "ratio": ratio, "ci95": ci, "level": 0.96, "rounds": 10}


def flagged() -> dict:
    """The torch report with one case disturbed, every torch case's measurement time,
    speedups refilled, two of them from A/B pairs (SYNTHETIC: renderer inputs)."""
    report = torch_report()
    for x in report["cases"]:
        if x["timing"] and x["backend"] != "iree":  # IREE cases keep provenance.started_at
            x["timing"]["measured_at"] = EAGER_AT if x["backend"] == c.EAGER else INDUCTOR_AT
    case = find(report, DISTURBED)
    case["timing"].update(disturbed=True, disturbance={
        "disturbed": True, "reason": REASON, "retaken": 4, "threshold": 0.25,
        "outside_share": [0.6, 0.1, 0.7, 0.05, 0.62, 0.1],
        "steal_share": [0.0] * 6, "nivcsw": [40, 2, 55, 1, 48, 3],
        "cpu_per_wall": [0.9, 1.9, 0.8, 1.95, 0.85, 1.9], "load1": [3.1] * 6,
        "method": "test"})
    case["provenance"]["synthetic"] = "SYNTHETIC disturbance for renderer tests"
    fill_speedups(report["cases"])
    rows = [pair(("torch-eager", "int8wo"), ("torch-inductor", "int8wo"), 0.5, [0.4, 0.625]),
            pair(("torch-eager", "baseline"), ("torch-eager", "int8wo"), 0.8, None)]
    assert fill_paired(report["cases"], rows) == 2
    return report


@pytest.fixture(scope="module")
def report():
    out = flagged()
    validate_report(out)  # the flag, the disturbance and both bases are the schema's
    return out


def test_the_counts_put_disturbed_beside_noisy(report):
    flags = c.flag_counts(report["cases"])
    timed = [x for x in report["cases"] if x["timing"]]
    assert flags == {"timed": len(timed), "noisy": sum(x["timing"]["noisy"] for x in timed),
                     "disturbed": 1}
    assert f"Of {len(timed)} timed: {flags['noisy']} noisy, 1 ⚠ disturbed." in \
        markdown.render(report)


def test_markdown_marks_the_case_and_says_why(report):
    text = markdown.render(report)
    summary, coverage = text.split("## Coverage", 1)
    assert "### ⚠ Disturbed (1)" in summary and f"- `{DISTURBED}`: {REASON}" in summary
    rows = {(r[3], r[4], r[5]): r for r in _md_rows(coverage)}
    col = {name: i for i, (name, _) in enumerate(markdown.COLUMNS)}
    status, speedup = col["Status"], col["Speedup"]
    assert rows[("16x64x64", "torch-inductor", "int8wo")][status] == "✅ ok ⚠ disturbed"
    assert rows[("16x64x64", "torch-eager", "int8wo")][status] == "✅ ok"
    # vs eager: the paired one with its interval, a cross-run one with how far apart.
    assert rows[("64x64x64", "torch-inductor", "int8wo")][speedup] == "2× (paired [1.6, 2.5])"
    cross = find(report, "host/torch-inductor/linear-16x256x64-f32/baseline")
    assert rows[("16x256x64", "torch-inductor", "baseline")][speedup] == \
        f"{cross['speedup']['vs_eager']:.3g}× (cross-run, 3 min apart)"


def _md_rows(coverage: str) -> list[list[str]]:
    lines = [line for line in coverage.split("### Explanation", 1)[0].splitlines()
             if line.startswith("| ")][1:]
    return [[cell.strip() for cell in line.split("|")[1:-1]] for line in lines]


@pytest.mark.slow
def test_html_shows_the_flag_and_the_reason_as_text(report):
    page = html.render(report, PEAK)
    row = page.split(f'data-id="{DISTURBED}"', 1)[0].rsplit("<tr", 1)[1]
    assert 'class="st-ok disturbed"' in row
    cells = page.split(f'data-id="{DISTURBED}"', 1)[1].split("</tr>", 1)[0]
    assert '<td class="t">ok · disturbed</td>' in cells  # its shape is CSS on the row
    assert "<h3>Disturbed (1)</h3>" in page and f"<code>{DISTURBED}</code>: {REASON}" in page
    assert "⚠" not in page  # a word and CSS, no emoji font needed
    assert 'class="flag-disturbed">1 disturbed</span>' in page
    paired = page.split(f'data-id="{PAIRED}"', 1)[1].split("</tr>", 1)[0]
    assert 'data-v="2.0">2 (paired [1.6, 2.5])</td>' in paired
    base = page.split(f'data-id="{PAIRED_BASE}"', 1)[1].split("</tr>", 1)[0]
    assert "1.25 (paired, no 95% interval)" in base
    assert "(cross-run, 3 min apart)" in page


def test_csv_has_the_flag_the_reason_and_each_speedups_basis(report):
    df = pd.read_csv(io.StringIO(csv_report.render(report, PEAK))).set_index("id")
    assert df.loc[DISTURBED, "disturbed"] == True  # noqa: E712 (a numpy bool)
    assert df.loc[DISTURBED, "disturbance_reason"] == REASON
    others = df.drop(DISTURBED)
    assert not others["disturbed"].dropna().any() and others["disturbance_reason"].isna().all()
    assert df["disturbed"].notna().sum() == sum(1 for x in report["cases"] if x["timing"])
    row = df.loc[PAIRED]
    assert (row["speedup_vs_eager"], row["speedup_vs_eager_basis"]) == (2.0, "paired")
    assert (row["speedup_vs_eager_ci95_lo"], row["speedup_vs_eager_ci95_hi"]) == (1.6, 2.5)
    assert row["speedup_vs_baseline_basis"] == "cross-run"
    assert row["speedup_vs_baseline_base_id"] == "host/torch-inductor/linear-64x64x64-f32/baseline"
    assert (row["speedup_vs_baseline_base_measured_at"],
            row["speedup_vs_baseline_case_measured_at"]) == (INDUCTOR_AT, INDUCTOR_AT)
    assert row["measured_at"] == INDUCTOR_AT and row["torchao_speedups_basis"] == "cross-run"
    iree = df.loc["host/iree/linear-64x64x64-f32/baseline"]
    assert (iree["speedup_vs_eager_base_measured_at"],
            iree["speedup_vs_eager_case_measured_at"]) == (EAGER_AT, "2026-11-21T08:38:13+00:00")


def test_dashboard_rows_carry_the_flag_and_the_basis(report):
    records = dashboard.render(report, PEAK)  # validated against the dashboard schema
    mine = [r for r in records if r["benchmark"]["extra_info"]["case_id"] == DISTURBED]
    assert mine and all(r["benchmark"]["extra_info"]["disturbed"] == "true"
                        and r["benchmark"]["extra_info"]["disturbance_reason"] == REASON
                        for r in mine)
    other = next(r for r in records if r["benchmark"]["extra_info"]["case_id"] == PAIRED)
    assert other["benchmark"]["extra_info"]["disturbed"] == "false"
    assert "disturbance_reason" not in other["benchmark"]["extra_info"]
    speed = {(r["benchmark"]["extra_info"]["case_id"], r["metric"]["name"]):
             r["metric"]["extra_info"] for r in records
             if r["metric"]["extra_info"]["unit"] == "x"}
    assert speed[(PAIRED, "speedup vs eager (x)")] == {
        "unit": "x", "basis": "paired", "base_case_id": PAIRED_BASE, "ci95_lo": "1.6",
        "ci95_hi": "2.5", "level": "0.96",
        "ab_row": "host+torch-eager+int8wo+linear-64x64x64-f32 -> "
                  "host+torch-inductor+int8wo+linear-64x64x64-f32 on linear-64x64x64-f32"}
    assert speed[(PAIRED, "speedup vs baseline (x)")] == {
        "unit": "x", "basis": "cross-run",
        "base_case_id": "host/torch-inductor/linear-64x64x64-f32/baseline",
        "base_measured_at": INDUCTOR_AT, "case_measured_at": INDUCTOR_AT}


@pytest.mark.slow
def test_html_highlights_the_disturbed_count_only_when_there_are_some():
    """A clean run's `0 disturbed` is plain text: the orange badge is kept for a count a
    reader must act on."""
    page = html_page("torch")
    assert "<span>0 disturbed</span>" in page and "flag-disturbed" not in page.split(
        "</style>", 1)[1]
