"""Reports a reader can scan (issue 45): short table cells with the whole text on hover,
the golden verdict beside the status, unsupported cases grouped by reason, no eager time
beside a case that has none, plain decimal latency ticks, and `width-out-of-reach` said
once in each report's legend. (The 1,400 px browser check: tests/test_report_chromium.py.)"""

from __future__ import annotations

import csv
import io
import re

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from tests.render_data import (
    CUDA_ABSENT,
    GPU_CASE,
    INCONCLUSIVE,
    PEAK,
    html_page,
    iree_report,
    torch_report,
    wide_report,
    with_unsupported,
)
from workflow.render import brief, csv_report, html, markdown, plots
from workflow.render import common as c


def row_cells(page: str, case_id: str) -> list[str]:
    """The <td> elements of a case's row in report.html, as written."""
    row = page.split(f'data-id="{case_id}"', 1)[1].split("</tr>", 1)[0]
    return re.findall(r"<td[^>]*>.*?</td>", row)


def headers(page: str) -> list[str]:
    return re.findall(r"<th [^>]*>([^<]*)</th>", page.split('id="case-table"', 1)[1])


@pytest.mark.slow
def test_a_long_reason_is_cut_in_its_cell_and_whole_on_hover():
    page = html_page("wide")
    cells = dict(zip(headers(page), row_cells(page, GPU_CASE), strict=True))
    cell = cells["Not measured"]
    assert "title=\"unsupported: no cuda device here: iree.runtime&#x27;s cuda driver is " \
           "unavailable (Error creating driver:" in cell
    shown = re.sub(r"<[^>]+>", "", cell)
    assert shown == "unsupported: no cuda device here…" and len(shown) <= brief.CELL_CHARS
    assert brief.short("pass ×1.002") == "pass ×1.002"  # short text stays as it is


@pytest.mark.slow
def test_the_golden_verdict_stands_beside_the_status():
    page = html_page("wide")
    assert headers(page)[:2] == ["Status", "Golden"]
    status, golden = row_cells(page, INCONCLUSIVE)[:2]
    assert ">ok<" in status and ">inconclusive ×1.381<" in golden


@pytest.mark.slow
def test_unsupported_cases_are_grouped_by_reason_then_by_what_their_ids_share():
    report = with_unsupported(torch_report(), 205)
    page, text = html.render(report, PEAK), markdown.render(report)
    part = page.split("<h3>Unsupported (210)</h3>", 1)[1].split("</ul>\n</li>", 1)[0]
    assert part.count("runs only `baseline` (210)") == 1
    # 210 ids of one reason fold under it, one line for SKU, backend and recipe.
    assert "<details><summary>the 210 cases, by SKU, backend and recipe</summary>" in part
    assert "<li><code>host/iree/…/int8wo</code> (210): <code>linear-100x64x64-f32</code>, " \
        in part
    summary = text.split("## Coverage", 1)[0]
    assert "runs only `baseline` (210):\n  - `host/iree/…/int8wo` (210): " \
           "`linear-100x64x64-f32`, " in summary
    assert summary.count("`host/iree/") == 1  # the group, no whole id repeated 210 times


@pytest.mark.slow
def test_an_unsupported_row_shows_no_eager_time():
    """The IREE int8wo case did not run: its eager sibling's time is not its own."""
    report = torch_report()
    unsupported = "host/iree/linear-64x64x64-f32/int8wo"
    eager = "host/torch-eager/linear-64x64x64-f32/int8wo"
    assert c.median_ms(next(x for x in report["cases"] if x["id"] == eager))
    page = html_page("torch")  # of an unchanged torch_report(), as `report` is
    cells = dict(zip(headers(page), row_cells(page, unsupported), strict=True))
    assert cells["Eager ms"] == '<td data-v=""></td>'
    rows = [line for line in markdown.render(report).splitlines()
            if line.startswith("| linear | default | f32 | 64x64x64 | iree | int8wo |")]
    eager_col = [name for name, _ in markdown.COLUMNS].index("Eager ms")
    assert [r.split(" | ")[eager_col] for r in rows] == ["—"]
    by_name = {r["id"]: r for r in csv.DictReader(io.StringIO(csv_report.render(report)))}
    assert by_name[unsupported]["eager_ms"] == ""


@pytest.mark.slow
def test_latency_ticks_are_plain_decimals():
    """Cases between 0.13 and 0.35 ms: matplotlib labels such an axis 2×10^-1."""
    report = iree_report()
    timed = [x for x in report["cases"] if c.median_ms(x) is not None]
    for i, x in enumerate(timed):
        x["timing"].update(median_ms=0.13 + 0.02 * i,
                           ci95_ms=[0.98 * (0.13 + 0.02 * i), 1.03 * (0.13 + 0.02 * i)])
    fig = plots.latency_figure(c.ordered(report["cases"]))
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels() + ax.get_xticklabels(minor=True)]
    assert {"0.2", "0.3"} <= set(labels)
    assert not [label for label in labels if "10^" in label or "$" in label or "e" in label]


@pytest.mark.slow
def test_width_out_of_reach_is_said_once_in_each_legend():
    report = wide_report()
    text, page = markdown.render(report), html_page("wide")  # of `report`
    explained = "width-out-of-reach: measuring stopped at a look because the 95% interval"
    assert text.count(explained) == 1 and page.count(explained) == 1
    timed = sum(1 for x in report["cases"] if c.median_ms(x) is not None)
    # Each timed row says it where it happened: report.md's interval, report.html's.
    assert text.split("### Explanation", 1)[0].count("] width-out-of-reach |") == timed
    assert page.count("] width-out-of-reach</td>") == timed
    assert CUDA_ABSENT in text  # the compile-only list keeps the whole reason
