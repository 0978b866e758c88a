"""report.html in a real headless Chromium (Debian's `chromium`), and the end-to-end run
that produces all five reports.

The browser is driven by Playwright (tests/chromium.py): the page must load with no
console error or warning, no uncaught exception, no failed load and no request to
anything but itself; show one table row per case; sort when a header is clicked; and
draw its plots. Screenshots are kept under artifacts/ (gitignored) for a person to look at.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile

import jsonschema
import pytest

from tests import chromium
from tests.conftest import REPO, snakemake, tiny_suite, write_suite
from tests.render_data import PEAK, iree_report, torch_report, with_kernels, with_synthetic_verdicts
from workflow.records.report import report_schema
from workflow.render import dashboard, html

pytestmark = pytest.mark.browser

ARTIFACTS = REPO / "artifacts"


@pytest.fixture(scope="session")
def browser_binary() -> str:
    return chromium.binary_or_skip()


def check_page(binary: str, page, screenshot, case_ids: list[str],
               probes: dict[str, str] | None = None) -> dict:
    seen = chromium.load(binary, page, screenshot, probes)
    assert seen["console_errors"] == [] and seen["exceptions"] == []
    assert seen["failed_requests"] == [] and seen["foreign_requests"] == []
    assert seen["ready"] == "1", "the page's script did not finish"
    assert seen["rows"] == len(case_ids) and sorted(seen["ids"]) == sorted(case_ids)
    timed = [float(v) for v in seen["ascending"] if v]
    assert timed == sorted(timed) and seen["ascending"][len(timed):] == [""] * (
        len(case_ids) - len(timed))
    assert [float(v) for v in seen["descending"] if v] == sorted(timed, reverse=True)
    assert seen["images"] and all(done and width > 0 for done, width in seen["images"])
    assert screenshot.stat().st_size > 10_000
    return seen


def test_fixture_report_in_chromium(browser_binary, tmp_path):
    report = with_synthetic_verdicts(iree_report())
    page = tmp_path / "report.html"
    page.write_text(html.render(report, PEAK))
    # No emoji or symbol glyph (U+2190 on: arrows, symbols, dingbats, emoji), which a
    # server's fonts may lack: statuses are words with CSS shapes (CI installs no
    # emoji font).
    assert [ch for ch in page.read_text() if ord(ch) >= 0x2190] == []
    ARTIFACTS.mkdir(exist_ok=True)
    seen = check_page(browser_binary, page, ARTIFACTS / "report-fixture.png",
                      [c["id"] for c in report["cases"]])
    # As first shown, before any sort: regressions first.
    regressed = [c["id"] for c in report["cases"] if c["golden"]["verdict"] == "regression"]
    assert seen["ids"][0] in regressed


# Every stacked kernel bar as laid out: its case, inner width and segments (name, share,
# drawn width and colour).
BARS = """Array.from(document.querySelectorAll('.kbar')).map(bar => ({
  case: bar.closest('.kcase').getAttribute('data-case'), width: bar.clientWidth,
  segments: Array.from(bar.querySelectorAll('.kseg')).map(s => ({
    name: s.getAttribute('data-name'), share: parseFloat(s.getAttribute('data-share')),
    width: s.getBoundingClientRect().width, colour: getComputedStyle(s).backgroundColor,
    title: s.getAttribute('title')}))}))"""


@pytest.mark.parametrize("which", [iree_report, torch_report])
def test_kernel_bars_are_drawn_in_proportion_to_shares(browser_binary, tmp_path, which):
    """Each profiled case with times has a bar whose segments are as wide as their shares
    of the bar (to a pixel), its largest kernels first, the rest one grey segment; a
    compile-only or failed profile has none."""
    report = with_kernels(which())
    page = tmp_path / "report.html"
    page.write_text(html.render(report, PEAK))
    ARTIFACTS.mkdir(exist_ok=True)
    seen = check_page(browser_binary, page, ARTIFACTS / f"report-kernels-{which.__name__}.png",
                      [c["id"] for c in report["cases"]], probes={"bars": BARS})
    bars = {b["case"]: b for b in seen["probes"]["bars"]}
    timed = [c for c in report["cases"]
             if c["kernels"] and c["kernels"]["calls"] and not c["kernels"]["error"]]
    assert timed and sorted(bars) == sorted(c["id"] for c in timed)
    for case in timed:
        bar = bars[case["id"]]
        assert bar["width"] > 300
        named = [r for r in case["kernels"]["rows"] if not r["name"].endswith(" others)")]
        names = [s["name"] for s in bar["segments"]]
        assert names[: min(len(named), html.BAR_SEGMENTS)] == \
            [r["name"] for r in named][: html.BAR_SEGMENTS]
        for seg in bar["segments"]:
            assert seg["width"] == pytest.approx(seg["share"] * bar["width"], abs=1.0), seg
            assert seg["name"] in seg["title"] and f"{100 * seg['share']:.1f} %" in seg["title"]
        # The segments fill the bar: the profile's whole time is drawn.
        assert sum(s["width"] for s in bar["segments"]) == pytest.approx(bar["width"], abs=1.0)
        greys = [s for s in bar["segments"] if s["colour"] == "rgb(187, 187, 187)"]
        assert greys == [s for s in bar["segments"] if s["name"].endswith(" others)")]
        colours = [s["colour"] for s in bar["segments"]]
        assert len(set(colours)) == len(colours)  # neighbours never share a colour
    # transformer_block's eleven dispatches, six kept by the record: six segments and
    # one grey "(5 others)".
    if which is iree_report:
        six = bars["host/iree/linear-64x128x64-f32/baseline"]["segments"]
        assert [s["name"] for s in six][-1] == "(5 others)" and len(six) == 7


def test_the_checker_sees_what_a_broken_page_does(browser_binary, tmp_path):
    """The negative control: the same checks catch console errors, exceptions and a
    fetch from elsewhere (a closed port on this machine's loopback), which is aborted
    and so is a failed load too (Chromium logs it on the console as well)."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
                    '<script>console.error("boom"); undefined_function();</script>'
                    "</body></html>")
    seen = chromium.load(browser_binary, page, None)
    assert [m for m in seen["console_errors"]
            if not m.startswith("Failed to load resource")] == ["boom"]
    assert "undefined_function" in json.dumps(seen["exceptions"])
    assert seen["foreign_requests"] == ["http://127.0.0.1:9/x.png"]
    assert [f.split(": ")[0] for f in seen["failed_requests"]] == ["http://127.0.0.1:9/x.png"]
    assert seen["ready"] is None and seen["rows"] == 0


@pytest.mark.e2e
def test_a_suite_produces_all_five_reports(browser_binary, tmp_path):
    suite = tiny_suite(workloads=[{"model": "linear", "shapes": [[16, 32, 32], [32, 32, 32]]},
                                  {"model": "ln_linear_relu", "shapes": [[16, 32, 64]]}])
    suite["skus"].pop("generic")
    write_suite(tmp_path / "suite.yaml", suite)
    snakemake(tmp_path, "all", "--configfile", str(tmp_path / "suite.yaml"))
    results = tmp_path / "results"
    report = json.loads((results / "report.json").read_text())
    jsonschema.Draft202012Validator(report_schema()).validate(report)
    ids = sorted(c["id"] for c in report["cases"])
    assert len(ids) == 3

    rows = list(csv.DictReader(io.StringIO((results / "report.csv").read_text())))
    assert sorted(r["id"] for r in rows) == ids

    md = (results / "report.md").read_text()
    coverage = md.split("## Coverage", 1)[1].split("### Explanation", 1)[0]
    body = [line for line in coverage.splitlines() if line.startswith("| ")][1:]
    assert len(body) == len(ids) and all("✅ ok" in line for line in body)

    records = json.loads((results / "dashboard.json").read_text())
    jsonschema.Draft202012Validator(dashboard.schema()).validate(records)
    assert {r["benchmark"]["extra_info"]["case_id"] for r in records} == set(ids)

    peak = json.loads((results / "peak.json").read_text())
    assert peak["gflops"] > 0
    assert f"{peak['gflops']:.1f} GFLOP/s" in (results / "report.html").read_text()
    ARTIFACTS.mkdir(exist_ok=True)
    check_page(browser_binary, results / "report.html", ARTIFACTS / "report-e2e.png", ids)

    # A finished suite reruns nothing, and Snakemake's own report carries the five.
    again = snakemake(tmp_path, "all", "--configfile", str(tmp_path / "suite.yaml"))
    assert "Nothing to be done" in again.stdout + again.stderr
    snakemake(tmp_path, "all", "--configfile", str(tmp_path / "suite.yaml"),
              "--report", str(tmp_path / "report.zip"))
    with zipfile.ZipFile(tmp_path / "report.zip") as archive:
        names = archive.namelist()
    for name in ("report.md", "report.csv", "dashboard.json", "report.html"):
        assert any(n.endswith("/" + name) for n in names), (name, names)
