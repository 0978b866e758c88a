"""results/history.html in a real headless Chromium (Debian's `chromium`, driven by
Playwright as tests/chromium.py does): the page loads with no console error, no uncaught
exception and no request to anything but itself; typing in the filter box leaves only
the matching series and updates the count; a change point's line stands at the first
run after the step; report.html's link lands on the case's section; and a page of 1000
series x 365 runs opens in seconds (its size and load time printed)."""

from __future__ import annotations

import contextlib
import time

import pytest

from tests import chromium
from tests.conftest import REPO
from tests.render_data import PEAK, iree_report
from tests.test_render_history import META, change_point, detection, example, points, series
from tests.test_render_history import vertices as path_vertices
from workflow.render import history, html

pytestmark = pytest.mark.browser

ARTIFACTS = REPO / "artifacts"
# Every section drawn, for a screenshot of the whole page: off-screen sections are
# skipped by content-visibility until scrolled near.
DRAW_ALL = ("document.querySelectorAll('section.series')"
            ".forEach(s => s.style.contentVisibility = 'visible')")
# Each change point's line: its plot's series, run index, x on the screen; the runs'
# group's screen transform (x = a * run + e) and its line's path data.
MARKS = """Array.from(document.querySelectorAll('line.cp')).map(l => {
  const svg = l.closest('svg'), g = svg.querySelector('g.runs'), m = g.getScreenCTM();
  const r = l.getBoundingClientRect();
  return {id: l.closest('section').getAttribute('data-id'), index: +l.dataset.index,
          x: r.left + r.width / 2, a: m.a, e: m.e,
          d: g.querySelector('path.line').getAttribute('d')};
})"""
VISIBLE = ("Array.from(document.querySelectorAll('section.series'))"
           ".filter(s => !s.hidden && s.offsetParent !== null).map(s => s.dataset.id)")


@pytest.fixture(scope="session")
def browser_binary() -> str:
    return chromium.binary_or_skip()


@contextlib.contextmanager
def tab(binary: str):
    """A page in Chromium with what a person's browser would meet recorded: console
    errors and warnings, uncaught exceptions, requests to anything but file: and data:
    (aborted)."""
    from playwright.sync_api import sync_playwright

    seen = {"console": [], "exceptions": [], "foreign": []}

    def route(r):
        if r.request.url.startswith(chromium.LOCAL_SCHEMES):
            r.continue_()
        else:
            seen["foreign"].append(r.request.url)
            r.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=binary, args=list(chromium.FLAGS))
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.route("**/*", route)
            page = context.new_page()
            page.on("console", lambda m: seen["console"].append(m.text)
                    if m.type in ("error", "warning", "assert") else None)
            page.on("pageerror", lambda e: seen["exceptions"].append(str(e)))
            yield page, seen
        finally:
            browser.close()


def clean(page, seen) -> None:
    assert page.evaluate("document.body.getAttribute('data-ready')") == "1"
    assert seen == {"console": [], "exceptions": [], "foreign": []}


def test_history_page_filters_marks_and_tooltips(browser_binary, tmp_path):
    all_series, det = example()
    path = tmp_path / "history.html"
    path.write_text(history.render(all_series, det, META))
    assert [ch for ch in path.read_text() if ord(ch) >= 0x2190] == []
    with tab(browser_binary) as (page, seen):
        page.goto(path.as_uri(), wait_until="load")
        clean(page, seen)
        ids = page.evaluate(VISIBLE)
        assert sorted(ids) == sorted(s["id"] for s in all_series)

        # Typing filters sections and summary rows by id; the count follows.
        page.fill("#filter", "LINEAR-64")
        shown = page.evaluate(VISIBLE)
        assert sorted(shown) == sorted(i for i in ids if "linear-64" in i) and len(shown) == 2
        assert page.text_content("#count") == "showing 2 of 4 series"
        assert page.evaluate("Array.from(document.querySelectorAll('#summary-table tbody tr'))"
                             ".filter(r => !r.hidden).length") == 2
        page.fill("#filter", "torch")
        page.check("#only-cp")
        assert page.evaluate(VISIBLE) == [i for i in ids if "torch" in i]
        page.fill("#filter", "")
        assert len(page.evaluate(VISIBLE)) == 2
        assert page.text_content("#count") == "showing 2 of 4 series"
        page.uncheck("#only-cp")
        assert page.text_content("#count") == "showing 4 of 4 series"

        # Each change point's line at its run's point: the path's own vertex, mapped to
        # the screen through the runs' group, within a pixel.
        marks = page.evaluate(MARKS)
        assert sorted(m["index"] for m in marks) == [5, 7]
        for m in marks:
            run_x = path_vertices(m["d"])[m["index"]][0]
            assert m["x"] == pytest.approx(m["a"] * run_x + m["e"], abs=1.0), m

        # Hovering there names the first run after the step: its commit and value.
        slow = next(s for s in all_series if s["id"] == ids[0])
        mark = next(m for m in marks if m["id"] == slow["id"])
        box = page.locator("svg.plot").first.bounding_box()
        page.mouse.move(mark["x"], box["y"] + box["height"] / 2)
        tip = page.text_content("#tip")
        assert page.is_visible("#tip") and "run 6 of 10" in tip
        assert slow["points"][5]["head_sha"][:12] in tip and "(5 invocations)" in tip
        assert "host bench-1" in tip and "versions iree 3.8.0, torch 2.9.0" in tip

        page.evaluate(DRAW_ALL)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=ARTIFACTS / "history.png", full_page=True)
        clean(page, seen)
    assert (ARTIFACTS / "history.png").stat().st_size > 10_000


def test_report_link_lands_on_the_case_series(browser_binary, tmp_path):
    report = iree_report()
    ids = [c["id"] for c in report["cases"]]
    (tmp_path / "report.html").write_text(html.render(report, PEAK, history_link=True))
    # Enough series before and after the target (sections go by id) that the browser
    # must scroll to it, and can scroll it to the top.
    many = [series(i, points(10, seed=k)) for k, i in enumerate(ids)]
    many += [series(f"{side}/extra-{k}/baseline", points(10, seed=100 + k))
             for k in range(30) for side in ("aaa", "zzz")]
    (tmp_path / "history.html").write_text(history.render(many, detection(many, {}), META))
    target = sorted(ids)[-1]
    with tab(browser_binary) as (page, seen):
        page.goto((tmp_path / "report.html").as_uri(), wait_until="load")
        row = page.locator(f'#case-table tr[data-id="{target}"]')
        row.locator("a").click()
        page.wait_for_load_state("load")
        page.wait_for_timeout(300)  # the scroll to the fragment
        assert page.url.endswith("history.html#" + history.anchor(target))
        landed = page.evaluate("""(() => {const t = document.querySelector(':target');
            return {id: t.id, case: t.dataset.id, top: t.getBoundingClientRect().top,
                    scrolled: window.scrollY}; })()""")
        assert landed["id"] == history.anchor(target)
        assert landed["case"] == f"{target} :: {history.LATENCY}"
        assert landed["scrolled"] > 1000 and abs(landed["top"]) <= 2, landed
        clean(page, seen)


def test_a_year_of_a_thousand_series_opens_in_seconds(browser_binary, tmp_path):
    """1000 series x 365 nightly runs, one in ten with a step: the page's size and the
    time Chromium takes to load it and to filter it, printed (pytest -s) for the issue's
    closing note; bounds far above what the 2-core CI machine takes, so that a page that
    grew per point or a script that lays out every plot fails."""
    many, cps = [], {}
    for k in range(1000):
        s = series(f"host/iree/linear-{k}x64x64-f32/baseline",
                   points(365, 180 if k % 10 == 0 else None, seed=k))
        many.append(s)
        if k % 10 == 0:
            cps[s["id"]] = [change_point(s, 180)]
    started = time.perf_counter()
    text = history.render(many, detection(many, cps), META)
    rendered = time.perf_counter() - started
    path = tmp_path / "history.html"
    path.write_text(text)
    size = path.stat().st_size
    with tab(browser_binary) as (page, seen):
        started = time.perf_counter()
        page.goto(path.as_uri(), wait_until="load")
        loaded = time.perf_counter() - started
        nav = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
        started = time.perf_counter()
        page.fill("#filter", "linear-50x")
        filtered = time.perf_counter() - started
        assert page.text_content("#count") == "showing 1 of 1000 series"
        page.check("#only-cp")
        page.fill("#filter", "")
        assert page.text_content("#count") == "showing 100 of 1000 series"
        clean(page, seen)
    print(f"\nhistory.html 1000 series x 365 runs: {size / 1e6:.1f} MB, rendered in "
          f"{rendered:.1f} s, Chromium load {loaded:.2f} s (loadEventEnd {nav / 1e3:.2f} s), "
          f"filter {filtered:.2f} s")
    assert size < 12e6 and nav < 20_000
