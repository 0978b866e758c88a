"""results/report.html without a browser: self-contained, one row per case, regressions
first, heatmaps for shape sweeps, the measured peak on the page. (The browser test is
tests/test_html_chromium.py.)"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from tests.render_data import (
    PEAK,
    find,
    iree_report,
    torch_report,
    with_kernels,
    with_synthetic_verdicts,
    with_training,
)
from workflow.render import common as c
from workflow.render import html, plots


class Page(HTMLParser):
    """Collects what a self-containment and structure check needs."""

    def __init__(self):
        super().__init__()
        self.rows: list[dict] = []
        self.urls: list[str] = []
        self.tags: list[str] = []
        self.images: list[str] = []
        self._in_body = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        for key in ("src", "href", "action", "data", "poster"):
            if attrs.get(key):
                self.urls.append(attrs[key])
        if tag == "img":
            self.images.append(attrs["src"])
        if tag == "tbody":
            self._in_body = True
        if tag == "tr" and self._in_body:
            self.rows.append(attrs)


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page


# Rendering draws every plot (seconds on the CI machine): once per report per module.
@pytest.fixture(scope="module")
def real():
    report = iree_report()
    return report, html.render(report, PEAK)


@pytest.fixture(scope="module")
def synthetic():
    report = with_synthetic_verdicts(iree_report())
    return report, html.render(report, PEAK)


@pytest.mark.slow
def test_self_contained_page_with_one_row_per_case(real):
    report, text = real
    page = parse(text)
    assert len(page.rows) == len(report["cases"])
    assert sorted(r["data-id"] for r in page.rows) == sorted(x["id"] for x in report["cases"])
    # Nothing is fetched: every URL is a data: URI, no external script, style or font.
    assert page.urls and all(u.startswith("data:image/png;base64,") for u in page.urls)
    assert "link" not in page.tags and not re.search(r"@import|url\(|https?://", text)
    assert len(page.images) == 4  # latency, two sweeps (one per SKU), GEMM throughput


@pytest.mark.slow
def test_regressions_first_then_failures_then_degraded(synthetic):
    report, text = synthetic
    page = parse(text)
    classes = [r["class"] for r in page.rows]
    assert classes[:2] == ["st-degraded regression"] * 2
    assert classes[2:4] == ["st-failed"] * 2 and classes[4] == "st-degraded"
    assert set(classes[5:]) == {"st-ok"}
    attention = text.split('<ul class="attention">', 1)[1].split("</ul>", 1)[0]
    assert attention.index("time regression") < attention.index("failed at compile")


@pytest.mark.slow
def test_peak_and_gflops_cells(real):
    report, text = real
    assert "100.0 GFLOP/s (test peak" in text
    case = next(x for x in report["cases"] if x["id"] == "host/iree/linear-64x128x64-f32/baseline")
    row = text.split(f'data-id="{case["id"]}"', 1)[1].split("</tr>", 1)[0]
    values = re.findall(r'data-v="([^"]*)"', row)
    assert repr(case["throughput"]["gflops"]) in values
    assert repr(100 * case["throughput"]["gflops"] / PEAK["gflops"]) in values
    assert "not measured" in html.render(report, None)


@pytest.mark.slow
def test_sweeps_group_by_everything_but_the_shape():
    report = iree_report()
    groups = plots.sweeps(report["cases"])
    assert sorted(k[3] for k in groups) == ["generic", "host"]
    for by_n in groups.values():
        cells = by_n[32]
        assert sorted(c.gemm_mkn(x)[:2] for x in cells) == [(16, 32), (16, 128), (64, 32),
                                                            (64, 128)]
    maps = plots.heatmaps(report["cases"])
    assert [m.title for m in maps] == ["linear f32 · generic · iree · baseline · N=32",
                                       "linear f32 · host · iree · baseline · N=32"]


@pytest.mark.slow
def test_sweep_heatmaps_show_speedups_where_there_are_some():
    """Inductor and IREE sweeps show the speedup over eager, eager int8wo the speedup over
    its baseline, and eager baseline (nothing to compare with) its GFLOP/s."""
    report = torch_report()
    maps = plots.heatmaps(report["cases"])
    labels = {m.title.split(" · ", 2)[2]: m.label for m in maps}
    # Every speedup in this report is a ratio of separately measured medians: the
    # colour bar says so.
    assert labels == {
        "iree · baseline · N=64": "speedup vs torch-eager (×, cross-run)",
        "torch-eager · baseline · N=64": "achieved GFLOP/s (no speedup recorded)",
        "torch-eager · int8wo · N=64": "speedup vs baseline recipe (×, cross-run)",
        "torch-inductor · baseline · N=64": "speedup vs torch-eager (×, cross-run)",
        "torch-inductor · int8wo · N=64": "speedup vs torch-eager (×, cross-run)",
    }


# The emoji the reports' statuses and flags once used (report.md still does): ✅ 🚧 ✘ ⊘ ⏭
# ⚙ ⚠, and the variation selector that asks for their emoji form.
STATUS_EMOJI = ("\u2705", "\U0001F6A7", "\u2718", "\u2298", "\u23ED", "\u2699", "\u26A0",
                "\uFE0F")


@pytest.fixture(scope="module")
def training():
    report = with_training(torch_report())
    return report, html.render(report, PEAK)


def status_cells(text: str) -> dict[str, str]:
    """Each row's first cell (its status), by case id."""
    return dict(re.findall(r'data-id="([^"]+)"[^>]*><td class="t">([^<]*)</td>', text))


@pytest.mark.parametrize("which", ["synthetic", "training"])
@pytest.mark.slow
def test_statuses_are_words_with_css_shapes_and_no_emoji(which, request):
    report, text = request.getfixturevalue(which)
    assert set(STATUS_EMOJI) == set(c.SYMBOLS.values()) | {"\u26A0", "\uFE0F"}
    assert not [ch for ch in STATUS_EMOJI if ch in text]
    cells = status_cells(text)
    assert len(cells) == len(report["cases"])
    for x in report["cases"]:
        assert cells[x["id"]].split(" ")[0] == c.status(x), x["id"]
    # Every status has its shape, drawn by the page's own CSS.
    for status in c.SYMBOLS:
        assert f"tr.st-{status} td:first-child::before, span.st-{status}::before" in text
    counts = c.counts(report["cases"])
    for status, n in counts.items():
        if n:
            assert f'<span class="st-{status}">{n} {status}</span>' in text


@pytest.mark.slow
def test_failed_degraded_and_unsupported_rows_say_so_in_words(synthetic, training):
    failed = status_cells(synthetic[1])["host/iree/histc_model-f32/baseline"]
    assert failed == "failed (compile)"
    assert "degraded" in status_cells(synthetic[1]).values()
    report, text = training
    cells = status_cells(text)
    assert cells["host/iree/linear-64x64x64-f32-train/baseline"] == "unsupported"
    # The Mode column, and the unsupported cases listed with why, one line per reason.
    row = text.split('data-id="host/torch-eager/linear-64x64x64-f32-train/baseline"', 1)[1]
    assert '<td class="t">training</td>' in row.split("</tr>", 1)[0]
    assert '<td data-v="0.031">3.1 %</td>' in row.split("</tr>", 1)[0]
    assert "<h3>Unsupported (7)</h3>" in text
    assert ("<li>the IREE backend benchmarks inference only (1): "
            "<code>host/iree/linear-64x64x64-f32-train/baseline</code></li>") in text


@pytest.mark.slow
def test_where_the_time_goes_has_a_bar_and_the_top_kernels_per_profiled_case():
    report = with_kernels(iree_report())
    text = html.render(report, PEAK)
    part = text.split('<h2 id="kernels">', 1)[1].split('<h2 id="latency">', 1)[0]
    cases = re.findall(r'<div class="kcase" data-case="([^"]+)">', part)
    assert sorted(cases) == sorted(x["id"] for x in report["cases"] if x["kernels"])
    assert len(parse(text).rows) == len(report["cases"])  # the case table is unchanged
    gelu = part.split('data-case="host/iree/ln_linear_relu-16x32x64-f32/baseline"', 1)[1]
    gelu = gelu.split('<div class="kcase"', 1)[0]
    rows = find(report, "host/iree/ln_linear_relu-16x32x64-f32/baseline")["kernels"]["rows"]
    widths = re.findall(r'class="kseg" style="width: ([0-9.]+)%; background: (#\w+)"', gelu)
    assert [float(w) for w, _ in widths] == pytest.approx([100 * r["share"] for r in rows],
                                                          abs=1e-4)
    # Each kernel's list swatch has its segment's colour; the list says what the bar does.
    assert re.findall(r'class="swatch" style="background: (#\w+)"', gelu) == \
        [colour for _, colour in widths]
    assert f'title="{rows[0]["name"]}: {100 * rows[0]["share"]:.1f} %, ' in gelu
    # The rest is one grey segment; compile-only and failed profiles have no bar.
    tb = part.split('data-case="host/iree/linear-64x128x64-f32/baseline"', 1)[1]
    tb = tb.split('<div class="kcase"', 1)[0]
    assert tb.count('class="kseg"') == 7 and '; background: #bbbbbb" title="(5 others): ' in tb
    assert '<li class="more">+8 more (39.0 %)</li>' in tb
    for quiet in ("gpu/iree/ln_linear_gelu-128x256x256-f32/baseline",
                  "generic/iree/linear-64x32x32-f32/baseline"):
        assert 'class="kbar"' not in part.split(f'data-case="{quiet}"', 1)[1].split(
            '<div class="kcase"', 1)[0]
    assert "no profile (the case's time stands): profiling (dispatch-events) failed" in part
    assert "&lt;dispatch-events&gt; | not supported" in part  # escaped, not markup
    assert "No case was profiled" in html.render(iree_report(), PEAK)


def test_kernel_colours_follow_the_name_and_differ_within_a_bar():
    names = [f"main$async_dispatch_{i}_matmul" for i in range(html.BAR_SEGMENTS)]
    colours = html.kernel_colours(names)
    assert len(set(colours.values())) == len(names)
    assert colours == html.kernel_colours(names)  # the same in every run
    # The largest kernel always gets the colour its name picks.
    assert colours[names[0]] == html.kernel_colours([names[0]])[names[0]]
    assert html.OTHERS_COLOUR not in html.PALETTE
