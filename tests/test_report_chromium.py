"""report.html at 1,400 px in headless Chromium (issue 45, item 8): in a report as wide as
real ones get (the compile-only case's CUDA driver message, an inconclusive golden
verdict, every interval marked width-out-of-reach), the interval and the golden verdict
are on screen without scrolling sideways, and the cut cell keeps its whole text on
hover. The screenshot is kept as artifacts/report-1400.png for a person to look at."""

from __future__ import annotations

import pytest

from tests import chromium
from tests.conftest import REPO
from tests.render_data import CUDA_ABSENT, GPU_CASE, INCONCLUSIVE, PEAK, wide_report
from workflow.render import html

pytestmark = pytest.mark.browser

WIDTH = 1400  # chromium.load's viewport
# Each header's right edge, the viewport's width and the page's, the compile-only row's
# cut cell and the inconclusive row's golden cell as laid out.
PROBES = {
    "right": "Object.fromEntries(Array.from(document.querySelectorAll('#case-table th'))"
             ".map(th => [th.textContent, th.getBoundingClientRect().right]))",
    "viewport": "document.documentElement.clientWidth",
    "cut": f"(() => {{ const r = document.querySelector('tr[data-id=\"{GPU_CASE}\"]');"
           " const i = Array.from(document.querySelectorAll('#case-table th'))"
           ".findIndex(th => th.textContent === 'Not measured');"
           " const td = r.cells[i]; return [td.textContent, td.title,"
           " td.getBoundingClientRect().width]; })()",
    "golden": f"(() => {{ const r = document.querySelector('tr[data-id=\"{INCONCLUSIVE}\"]');"
              " return [r.cells[0].textContent, r.cells[1].textContent,"
              " r.cells[1].getBoundingClientRect().right]; })()",
}


def test_the_interval_and_the_golden_verdict_show_at_1400_px(tmp_path):
    binary = chromium.binary_or_skip()
    report = wide_report()
    page = tmp_path / "report.html"
    page.write_text(html.render(report, PEAK))
    (REPO / "artifacts").mkdir(exist_ok=True)
    shot = REPO / "artifacts" / "report-1400.png"
    seen = chromium.load(binary, page, shot, PROBES)
    assert seen["console_errors"] == [] and seen["exceptions"] == []
    assert seen["rows"] == len(report["cases"]) and shot.stat().st_size > 10_000
    probes = seen["probes"]
    assert probes["viewport"] == WIDTH
    right = probes["right"]
    for column in ("Status", "Golden", "Median ms", "95% CI ms"):
        assert right[column] <= WIDTH, (column, right)
    text, title, width = probes["cut"]
    assert text == "unsupported: no cuda device here…" and width < 300
    assert title == f"unsupported: {CUDA_ABSENT}"
    assert probes["golden"][:2] == ["ok", "inconclusive ×1.381"]
    assert probes["golden"][2] <= WIDTH
