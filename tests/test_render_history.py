"""results/history.html without a browser (the browser test is
tests/test_history_chromium.py): a section per series under its anchor, change points
drawn and written out, every value escaped, nothing fetched, one vertex per run; and
report.html's links to it.

The series are synthetic, in history/query.series' shape (runs a day apart, five
invocation values each around a level that steps up 30 % at a chosen run), and the
detection in history/detect.detect_series' shape with the change point a detector would
report there: the page is what is tested, not the detector."""

from __future__ import annotations

import hashlib
import math
import random
import re
from datetime import UTC, datetime
from html.parser import HTMLParser

import pytest

from tests.render_data import PEAK, iree_report
from workflow.render import history, html

LATENCY = "latency median (ms)"
DAY = 86400
START = 1_767_225_600  # 2026-01-01T00:00:00Z


def sha(k: int) -> str:
    return hashlib.sha1(f"commit {k}".encode()).hexdigest()


def points(n: int, step_at: int | None = None, factor: float = 1.3, seed: int = 0,
           level: float = 2.0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        mean = level * (factor if step_at is not None and k >= step_at else 1.0)
        values = [mean * (1 + rng.gauss(0, 0.01)) for _ in range(5)]
        ts = START + k * DAY
        out.append({"run_id": hashlib.sha256(str(k).encode()).hexdigest()[:16],
                    "timestamp": ts, "time": datetime.fromtimestamp(ts, UTC)
                    .strftime("%Y-%m-%dT%H:%M:%SZ"), "head_sha": sha(k),
                    "head_branch": "main", "repo": "lab/models", "workflow_id": 0,
                    "versions": {"iree": "3.8.0", "torch": "2.9.0"}, "host": "bench-1",
                    "values": values, "value": sorted(values)[2]})
    return out


def series(case_id: str, pts: list[dict], metric: str = LATENCY, unit: str = "ms") -> dict:
    return {"id": f"{case_id} :: {metric}", "case_id": case_id, "metric": metric,
            "unit": unit, "direction": "lower", "points": pts}


def change_point(s: dict, index: int, factor: float = 1.3) -> dict:
    """The change point detect_series reports at `index`, with the run fields it adds."""
    pts = s["points"]
    kind = "regression" if factor > 1 else "improvement"
    return {"index": index, "before": 2.0, "after": 2.0 * factor, "ratio": factor,
            "change_percent": 100 * (factor - 1), "ci95": [factor - 0.02, factor + 0.02],
            "confidence": 1.0, "p_value": 1e-9, "kind": kind, "runs_before": index,
            "runs_after": len(pts) - index, "series": s["id"], "case_id": s["case_id"],
            "metric": s["metric"], "run_id": pts[index]["run_id"],
            "time": pts[index]["time"], "head_sha": pts[index]["head_sha"],
            "previous_run_id": pts[index - 1]["run_id"],
            "previous_sha": pts[index - 1]["head_sha"]}


def detection(all_series: list[dict], cps: dict[str, list[dict]],
              unjudged: dict[str, str] | None = None) -> dict:
    unjudged = unjudged or {}
    entries = [{"series": s["id"], "case_id": s["case_id"], "metric": s["metric"],
                "unit": s["unit"], "direction": s["direction"], "runs": len(s["points"]),
                "judged": s["id"] not in unjudged, "reason": unjudged.get(s["id"]),
                "change_points": cps.get(s["id"], [])} for s in all_series]
    return {"settings": {"window": 50, "max_pvalue": 1e-5, "min_change": 0.02,
                         "confidence": 0.99, "min_runs": 4, "seed": 0},
            "series": entries, "change_points": [cp for e in entries
                                                 for cp in e["change_points"]]}


NASTY = 'host/iree/<script>alert("x")</script>&\'/baseline'
META = {"store": "history", "generated_at": "2026-01-11T00:00:00+00:00",
        "settings": {"window": 50}}


def example() -> tuple[list[dict], dict]:
    """Four series of ten runs: a 30 % regression at run 6 (index 5), a 25 %
    improvement at run 8, a flat one with a nasty id, and one too short to judge."""
    slow = series("host/iree/linear-64x64x64-f32/baseline", points(10, 5, seed=1))
    fast = series("host/torch-inductor/linear-64x64x64-f32/baseline",
                  points(10, 7, factor=0.75, seed=2))
    flat = series(NASTY, points(10, seed=3))
    short = series("host/iree/mlp-f32/baseline", points(3, seed=4))
    all_series = [flat, fast, short, slow]  # query's order: by id
    det = detection(all_series, {slow["id"]: [change_point(slow, 5)],
                                 fast["id"]: [change_point(fast, 7, 0.75)]},
                    {short["id"]: "3 runs, needs 4"})
    return all_series, det


class Page(HTMLParser):
    """Sections, summary rows, URLs, elements by tag and path data of a page."""

    def __init__(self):
        super().__init__()
        self.sections: list[dict] = []
        self.rows: list[dict] = []
        self.urls: list[str] = []
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        self.urls += [attrs[k] for k in ("src", "href", "action", "data", "poster")
                      if attrs.get(k) is not None]
        if tag == "section":
            self.sections.append(attrs)
        if tag == "tr" and "data-id" in attrs:
            self.rows.append(attrs)

    def all(self, tag: str, cls: str | None = None) -> list[dict]:
        return [a for t, a in self.tags if t == tag and (cls is None or a.get("class") == cls)]


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page


def vertices(d: str) -> list[tuple[float, float]]:
    """The vertices of a path made of M/m/l/L pairs (line_path's output), in order."""
    tokens = re.findall(r"[MmLl]|-?(?:\d+\.?\d*|\.\d+)", d)
    out, command, x, y, numbers = [], None, 0.0, 0.0, []
    for token in tokens:
        if token in "MmLl":
            command = token
            continue
        numbers.append(float(token))
        if len(numbers) == 2:
            dx, dy = numbers
            numbers = []
            if command in "ML":
                x, y = dx, dy
                command = "L" if command == "M" else command
            else:
                x, y = x + dx, y + dy
                command = "l" if command == "m" else command
            out.append((x, y))
    return out


@pytest.fixture(scope="module")
def page():
    all_series, det = example()
    text = history.render(all_series, det, META)
    return all_series, det, text, parse(text)


def test_anchor_is_stable_per_case_and_metric():
    a = history.anchor("host/iree/linear/baseline")
    assert re.fullmatch(r"s-[0-9a-f]{12}", a)
    assert a == history.anchor("host/iree/linear/baseline", LATENCY)
    assert a == "s-" + hashlib.sha256(b"host/iree/linear/baseline\0" + LATENCY.encode()
                                      ).hexdigest()[:12]
    assert a != history.anchor("host/iree/linear/baseline", "compile seconds (s)")


def test_one_section_per_series_under_its_anchor_regressions_first(page):
    all_series, _, text, parsed = page
    ids = [s["data-id"] for s in parsed.sections]
    assert sorted(ids) == sorted(s["id"] for s in all_series)
    assert [s["id"] for s in parsed.sections] == \
        [history.anchor(i.split(" :: ")[0]) for i in ids]
    # The regression first, then the improvement, then the rest by id; the summary in
    # the same order, each row linking to its section.
    assert ids[0].startswith("host/iree/linear") and ids[1].startswith("host/torch")
    assert [r["data-id"] for r in parsed.rows] == ids
    assert [s["data-cp"] for s in parsed.sections] == ["1", "1", "0", "0"]
    assert [u for u in parsed.urls if u.startswith("#")] == \
        ["#" + s["id"] for s in parsed.sections]
    assert "<p>4 series: 1 with a regression, 2 with any change point." in text


def test_change_points_are_marked_and_written_out(page):
    all_series, _, text, parsed = page
    slow = all_series[3]
    label = f"+30.0 % (regression) at {slow['points'][5]['head_sha'][:8]}"
    improved = f"-25.0 % (improvement) at {all_series[1]['points'][7]['head_sha'][:8]}"
    # The label in the plot (red, with the kind in words), in the summary and in the text.
    assert text.count(label) == 3 and text.count(improved) == 3
    assert '<text class="regression" x="' in text
    detail = re.search(r'<li class="regression">([^<]*)</li>', text).group(1)
    assert detail.startswith(label + ": run 6 of 10 (2026-01-06T00:00:00Z, branch main)")
    assert f"after {slow['points'][4]['head_sha'][:8]} (2026-01-05T00:00:00Z)" in detail
    marks = parsed.all("line", "cp regression")
    assert [m["data-index"] for m in marks] == ["5"]
    assert len(parsed.all("line", "cp improvement")) == 1
    # Where the step is: the mark at the sixth run's x, dashed levels on either side.
    x = float(marks[0]["x1"])
    assert x == pytest.approx(history.x_positions(10)[5], abs=0.05)
    assert len(parsed.all("line", "level")) == 4
    # Not judged, and no change point, said in words.
    assert "not judged: 3 runs, needs 4" in text and "no change point" in text


def test_one_vertex_and_one_whisker_per_run(page):
    all_series, _, _, parsed = page
    plots = parsed.all("svg", "plot")
    lines, whiskers = parsed.all("path", "line"), parsed.all("path", "whiskers")
    assert len(plots) == len(lines) == len(whiskers) == 4
    by_id = {s["id"]: s for s in all_series}
    for section, plot, line, whisker in zip(parsed.sections, plots, lines, whiskers,
                                                strict=True):
        s = by_id[section["data-id"]]
        n = len(s["points"])
        drawn = vertices(line["d"])
        assert [x for x, _ in drawn] == list(range(n))  # x in runs, every run once
        lo, hi = float(plot["data-lo"]), float(plot["data-hi"])
        y = [history.BOTTOM - (p["value"] - lo) / (hi - lo) * (history.BOTTOM - history.TOP)
             for p in s["points"]]
        assert [v for _, v in drawn] == pytest.approx(y, abs=0.5)
        assert whisker["d"].count("v") == n
        assert len(plot["data-v"].split(" ")) == n and plot["data-r"] == f"0-{n - 1}"
        assert plot["data-n"] == "5"


def test_a_run_without_values_leaves_a_gap():
    pts = points(6, seed=5)
    pts[2]["values"], pts[2]["value"] = [], math.nan
    text = history.render([series("host/iree/gap/baseline", pts)], None, META)
    line = parse(text).all("path", "line")[0]["d"]
    assert [x for x, _ in vertices(line)] == [0, 1, 3, 4, 5] and "m2" in line
    assert parse(text).all("path", "whiskers")[0]["d"].count("v") == 5
    assert "not judged: change-point detection was not run" in text


def test_nasty_case_ids_are_escaped(page):
    _, _, text, parsed = page
    assert "<script>alert" not in text and NASTY not in text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#x27;/baseline" in text
    assert NASTY + " :: " + LATENCY in [s["data-id"] for s in parsed.sections]
    assert history.anchor(NASTY) in [s["id"] for s in parsed.sections]
    assert len(parsed.all("script")) == 1  # the page's own


def test_self_contained_with_no_symbol_glyphs(page):
    _, _, text, parsed = page
    # Every URL is a fragment of this page; no external script, style, font or image.
    assert parsed.urls and all(u.startswith("#") for u in parsed.urls)
    assert "http" not in text and "@import" not in text and "<link" not in text
    # The only url()s: the point markers, one per run spacing (10 runs, 3 runs).
    assert set(re.findall(r"url\(([^)]*)\)", text)) == \
        {"#" + m["id"] for m in parsed.all("marker")} == {"#pt0", "#pt1"}
    assert [ch for ch in text if ord(ch) >= 0x2190] == []


def test_filter_controls_and_header(page):
    all_series, _, text, parsed = page
    # The controls work with the script, which shows them; without it the page reads
    # as a whole and says so.
    assert '<div id="controls" hidden>' in text
    inputs = {a["id"]: a for a in parsed.all("input")}
    assert inputs["filter"]["type"] == "search" and inputs["only-cp"]["type"] == "checkbox"
    assert '<p id="count">showing 4 of 4 series</p>' in text
    assert "<dt>Store</dt><dd>history</dd>" in text
    assert "<dt>Runs</dt><dd>10 runs, 4 series</dd>" in text
    assert f"<dt>First run</dt><dd>2026-01-01T00:00:00Z ({sha(0)[:12]})</dd>" in text
    assert f"<dt>Last run</dt><dd>2026-01-10T00:00:00Z ({sha(9)[:12]})</dd>" in text
    assert "max_pvalue 1e-05" in text and "seed 0" in text
    # The runs table the tooltips read: one row per run, in run order.
    runs = text.split('<table id="runs">', 1)[1]
    assert runs.count("<tr><td") == 10 and runs.index(sha(0)[:12]) < runs.index(sha(9)[:12])


def test_an_empty_store_says_so():
    text = history.render([], None, META)
    assert "No series: nothing has been ingested" in text
    assert "<dt>Runs</dt><dd>0 runs, 0 series</dd>" in text


def spaced(pts: list[dict], seconds: int) -> list[dict]:
    """The points `seconds` apart from START instead of a day."""
    return [{**p, "time": datetime.fromtimestamp(START + k * seconds, UTC)
             .strftime("%Y-%m-%dT%H:%M:%SZ")} for k, p in enumerate(pts)]


def x_labels(pts: list[dict]) -> list[str]:
    return [label for _, label in history.x_ticks(pts, history.x_positions(len(pts)))]


def test_the_time_axis_tells_its_ticks_apart():
    """Nightly runs: a date each. Runs of one day (a user's afternoon of runs) all read
    the same date: the time of day then, with the date where it changes."""
    assert x_labels(points(11)) == ["2026-01-01", "2026-01-03", "2026-01-05", "2026-01-07",
                                    "2026-01-09", "2026-01-11"]
    assert x_labels(spaced(points(11), 600)) == ["2026-01-01 00:00", "00:20", "00:40",
                                                  "01:00", "01:20", "01:40"]
    assert x_labels(spaced(points(11), 3600 * 5)) == [
        "2026-01-01 00:00", "10:00", "20:00", "2026-01-02 06:00", "16:00",
        "2026-01-03 02:00"]
    assert x_labels(spaced(points(6), 7)) == ["2026-01-01 00:00:00", "00:00:07", "00:00:14",
                                              "00:00:21", "00:00:28", "00:00:35"]
    assert x_labels(spaced(points(3), 0)) == ["run 1", "run 2", "run 3"]
    labels = x_labels(spaced(points(40), 900))
    assert len(set(labels)) == len(labels)


def test_nice_ticks_and_paths():
    assert history.nice_ticks(0.94, 1.38) == [1.0, 1.1, 1.2, 1.3]
    assert history.nice_ticks(0, 100) == [0, 20, 40, 60, 80, 100]
    assert history.line_path([10.4, 8.6, 8.6, None, 20.0]) == "M0 10l1-1 1 0m2 11"
    assert history.line_path([5.0]) == "M0 5l0 0"  # a lone run still gets its point
    assert history.whisker_path([10, 12], [14, 13]) == "M0 10v4m1-2v1"
    assert history.ranges([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"


@pytest.fixture(scope="module")
def report():
    return iree_report()


@pytest.mark.parametrize("linked", [True, False])
@pytest.mark.slow
def test_report_links_each_case_to_its_series(report, linked):
    text = html.render(report, PEAK, history_link=linked)
    links = re.findall(r'<a href="history\.html#(s-[0-9a-f]{12})"[^>]*>([^<]*)</a>', text)
    if not linked:
        assert links == [] and "history.html" not in text
        return
    rows = re.findall(r'<tr class="[^"]*" data-id="([^"]+)"', text)
    assert [a for a, _ in links] == [history.anchor(i) for i in rows]
    # The link is the Workload cell, its text unchanged (the sort and filter read it).
    by_id = {x["id"]: x for x in report["cases"]}
    assert [w for _, w in links] == [by_id[i]["workload"] for i in rows]


def test_runs_disturbed_are_said_used_and_their_outliers_left_out():
    """Changed with issue 43: disturbed runs are used (with their wider spread); the
    ones detection left out as outliers among their neighbours are named."""
    pts = points(10)
    pts[2]["clean"] = pts[3]["clean"] = False
    s = series("host/iree/x/baseline", pts)
    page = history.render([s], None, {"store": "h"})
    assert "2 run(s) disturbed by outside load, used with their wider spread: run 3-4" \
        in page
    det = detection([s], {})
    det["series"][0]["outliers"] = [3]
    assert "; left out as outliers among their neighbours: run 4" in history.render(
        [s], det, {"store": "h"})
    assert "disturbed by outside load" not in history.render(
        [series("host/iree/x/baseline", points(10))], None, {"store": "h"})


def two_configurations() -> list[dict]:
    """One case measured at 1 thread for six runs, then at 2 (x0.6) for five: two
    series, as history/query.series gives them."""
    from workflow.history.query import label_configurations

    pts = points(11)
    for p in pts[6:]:
        p["values"] = [v * 0.6 for v in p["values"]]
        p["value"] *= 0.6
    one = {**series("host/torch/x/baseline", pts[:6]), "config": "device=cpu,threads=1"}
    two = {**series("host/torch/x/baseline", pts[6:]), "config": "device=cpu,threads=2"}
    return label_configurations([two, one])


def test_a_new_configuration_is_a_section_of_its_own():
    """Issue 43: a case measured at two configurations is two sections, each naming
    its configuration; the newer says where it began and keeps the anchor report.html
    links to; neither has a change point at the change."""
    one, two = two_configurations()
    assert one["id"] == "host/torch/x/baseline :: latency median (ms) [device=cpu,threads=1]"
    page = history.render([one, two], detection([one, two], {}), META)
    parsed = parse(page)
    ids = {x["data-id"]: x["id"] for x in parsed.sections}
    assert ids == {one["id"]: history.anchor("host/torch/x/baseline", LATENCY,
                                             "device=cpu,threads=1"),
                   two["id"]: history.anchor("host/torch/x/baseline")}
    assert '<span class="config">[device=cpu,threads=2]</span>' in page
    assert ("A new measurement configuration from 2026-01-07T00:00:00Z "
            f"({sha(6)[:8]}) after [device=cpu,threads=1]: a series of its own") in page
    assert not parsed.all("line", "cp regression") and not parsed.all("line", "cp improvement")
