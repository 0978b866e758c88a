"""results/history.html: every series of the history store (issue 26) on one
self-contained page, as report.html is (inline CSS, a small inline script, nothing from
the network): one plot per series with runs in order along x, each run's median a
point on a line and its invocations' spread (min..max) a light bar behind it, and the
change points found marked where the step happened, each also written out as text;
filterable by id and by "has change points". This module computes every coordinate and text;
templates/history.html.j2 lays them out (escaped: `templating`).

The plots are inline SVG drawn here, not matplotlib images: a page of 1000 series x 365
runs must stay small and open in seconds. So a run costs a few bytes of two paths (its
median a vertex of the line, whose markers draw the points; its min and max the ends
of a light vertical bar) and of its value in the plot's data-v; what its tooltip shows
of the run (time, commit, branch, host, versions) is the run's row in the page's one
runs table, which the script reads on hover, never repeated per series or per point.
Measured (tests/test_history_chromium.py): 1000 series x 365 runs make 9.2 MB, which
Chromium loads in about a second (off-screen sections are not laid out until near)."""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime
from itertools import pairwise

from workflow.render import common as c
from workflow.render import templating

LATENCY = "latency median (ms)"
# The viewBox of every plot and the plot box inside it (room left for the y ticks, below
# for the dates); the page scales the SVG to its column, so these are proportions.
WIDTH, HEIGHT = 760, 180
LEFT, RIGHT, TOP, BOTTOM = 70.0, 724.0, 16.0, 146.0
X_TICKS, Y_TICKS = 6, 5
# A point's radius; below DENSE units between runs half that, so a year of nightly
# runs stays a line with dots rather than a smear.
DOT, DENSE = 2.2, 6.0
# Sections (and summary rows) in this order: a regression first, then an improvement.
ORDER = {"regression": 0, "improvement": 1}


def anchor(case_id: str, metric: str = LATENCY, config: str | None = None) -> str:
    """The id of a series' section: stable across pages and runs, safe in a URL
    fragment whatever the case id holds (report.html links to it). `config`: a
    configuration's series other than the case's newest (render() gives the newest the
    plain anchor, the one report.html links to)."""
    key = f"{case_id}\0{metric}" + ("" if config is None else f"\0{config}")
    return "s-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def _num(tenths: int) -> str:
    """A coordinate in tenths of a unit as the shortest path text: 19 '1.9', 20 '2',
    5 '.5', -5 '-.5', 0 '0'."""
    whole, tenth = divmod(abs(tenths), 10)
    text = (str(whole) if whole or not tenth else "") + (f".{tenth}" if tenth else "")
    return ("-" if tenths < 0 else "") + text


def _pair(dx: int, dy: int) -> str:
    """A relative step: a minus sign is the path grammar's own separator."""
    return f"{dx}{'' if dy < 0 else ' '}{dy}"


def line_path(ys: list[float | None]) -> str:
    """The median line through (i, ys[i]): x in runs (the plot's group stretches a run
    to its width), y to the unit (a pixel of a plot shown at its size: finer costs a
    quarter of a large page's bytes and shows nothing more), each step relative to the
    previous vertex's own rounded position, so no rounding error accumulates. A run
    without a value (None) leaves a gap: the next stretch starts with a move ('m')."""
    pts = [(i, round(y)) for i, y in enumerate(ys) if y is not None]
    if not pts:
        return ""
    # Pairs after an absolute move are absolute lines, after a relative one relative
    # lines: the first step says "l", later ones only where a gap needs an "m".
    text, implicit = f"M{pts[0][0]} {pts[0][1]}", "L"
    for (ax, ay), (bx, by) in pairwise(pts):
        command = "l" if bx == ax + 1 else "m"
        text += (" " if command == implicit else command) + _pair(bx - ax, by - ay)
        implicit = "l"
    # A lone vertex draws no marker: a zero step after it does (its point).
    return text + ("l0 0" if len(pts) == 1 else "")


def whisker_path(highs: list[float | None], lows: list[float | None]) -> str:
    """One vertical stroke per run from its largest value (highs, upper on the page)
    down to its smallest, then a move to the next run's upper end: 'M0 hi v len m1 dy v
    len ...'; a run without values has none."""
    text, last = "", None
    for i, (high, low) in enumerate(zip(highs, lows, strict=True)):
        if high is None:
            continue
        top, bottom = round(high), round(low)
        text += (f"M{i} {top}" if last is None else "m" + _pair(i - last[0], top - last[1]))
        text += f"v{bottom - top}"
        last = (i, bottom)
    return text


def x_positions(n: int) -> list[float]:
    """Where each of n runs sits: evenly spaced in run order (not time), one in the
    middle."""
    if n == 1:
        return [(LEFT + RIGHT) / 2]
    step = (RIGHT - LEFT) / (n - 1)
    return [LEFT + i * step for i in range(n)]


def at(x: float) -> str:
    """A position as the paths place their vertices (rounded to a tenth)."""
    return _num(round(10 * x))


def nice_ticks(lo: float, hi: float, n: int = Y_TICKS) -> list[float]:
    """About n round values (1, 2, 2.5 or 5 times a power of ten apart) within [lo, hi]."""
    raw = (hi - lo) / n
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step)
    return [round(k * step, 12) for k in range(first, math.floor(hi / step) + 1)]


def finite(point: dict) -> list[float]:
    """A run's values that can be drawn (history/query gives a run without any a NaN
    median)."""
    return [v for v in point["values"] or [point["value"]] if math.isfinite(v)]


def value_range(points: list[dict]) -> tuple[float, float]:
    """The y axis: every invocation value of every run, with a margin; a flat series
    gets 5 % of its value either side."""
    values = [v for p in points for v in finite(p)] or [0.0]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
    return lo - pad, hi + pad


def _y(lo: float, hi: float):
    return lambda v: BOTTOM - (v - lo) / (hi - lo) * (BOTTOM - TOP)


def ranges(indices: list[int]) -> str:
    """Run numbers as ranges, '0-364' or '0-9,12-20': a series is mostly every run."""
    out, start = [], indices[0]
    for prev, cur in zip(indices, [*indices[1:], None], strict=True):
        if cur != prev + 1:
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = cur
    return ",".join(out)


def x_ticks(points: list[dict], xs: list[float]) -> list[tuple[str, str]]:
    """Up to X_TICKS runs along the axis, labelled with when they ran (tick_labels)."""
    n = len(points)
    stride = max(1, math.ceil((n - 1) / (X_TICKS - 1)))
    picks = [*range(0, n - 1, stride), n - 1]
    if len(picks) > 2 and picks[-1] - picks[-2] <= stride / 2:
        del picks[-2]  # the last run's date, not squeezed against the one before
    labels = tick_labels([points[i]["time"] for i in picks], picks)
    return [(at(xs[i]), label) for i, label in zip(picks, labels, strict=True)]


def tick_labels(times: list[str], picks: list[int]) -> list[str]:
    """The ticks' labels, as short as tells them apart: the date where each tick has a
    day of its own (a nightly series); else the time of day (HH:MM, HH:MM:SS where the
    minutes repeat), the date before it where the day changes and on the first tick
    (runs of one afternoon would otherwise all read the same date); runs in one second:
    their numbers."""
    when = []
    for text in times:
        try:
            when.append(datetime.fromisoformat(text))
        except (TypeError, ValueError):  # not a time history/query wrote: shown as it is
            return [str(t)[:16] for t in times]
    dates = [w.strftime("%Y-%m-%d") for w in when]
    if len(set(dates)) == len(dates):
        return dates
    for fmt in ("%H:%M", "%H:%M:%S"):
        clocks = [w.strftime(fmt) for w in when]
        if len(set(zip(dates, clocks, strict=True))) == len(when):
            return [clock if k and dates[k - 1] == dates[k] else f"{dates[k]} {clock}"
                    for k, clock in enumerate(clocks)]
    return [f"run {i + 1}" for i in picks]


def cp_label(cp: dict, point: dict) -> str:
    """'+30.0 % (regression) at 6f3a2b1c': the step, its kind in words (not colour
    alone) and the commit of the first run after it."""
    where = point["head_sha"][:8] or f"run {cp['index'] + 1}"
    return f"{cp['change_percent']:+.1f} % ({cp['kind']}) at {where}"


def cp_detail(cp: dict, points: list[dict], unit: str) -> str:
    """The change point in words: where, from what to what, and how sure."""
    i, point = cp["index"], points[cp["index"]]
    before = points[i - 1]
    lo, hi = cp["ci95"]
    branch = f", branch {point['head_branch']}" if point["head_branch"] else ""
    return (f"{cp_label(cp, point)}: run {i + 1} of {len(points)} ({point['time']}"
            f"{branch}), after "
            f"{before['head_sha'][:8] or f'run {i}'} ({before['time']}); median "
            f"{c.fmt(cp['before'])} to {c.fmt(cp['after'])} {unit} over "
            f"{cp['runs_before']} and {cp['runs_after']} runs; ratio {c.fmt(cp['ratio'])}, "
            f"95% interval [{c.fmt(lo)}, {c.fmt(hi)}], confidence {cp['confidence']:.3f}, "
            f"p {cp['p_value']:.2g}")


def levels(cps: list[dict], xs: list[float], y) -> list[dict]:
    """The median level of each stretch between change points (dashed lines): what the
    step is a step between."""
    if not cps:
        return []
    bounds = [0, *(cp["index"] for cp in cps), len(xs)]
    values = [cps[0]["before"], *(cp["after"] for cp in cps)]
    return [{"x1": at(xs[a]), "x2": at(xs[b - 1]), "y": at(y(v))}
            for (a, b), v in zip(pairwise(bounds), values, strict=True)]


def cp_marks(cps: list[dict], points: list[dict], xs: list[float]) -> list[dict]:
    """A vertical line at the first run after each step and its label beside it,
    stacked when several; the label sits left of a line in the plot's right half."""
    marks = []
    for k, cp in enumerate(cps):
        x = xs[cp["index"]]
        right = x > (LEFT + RIGHT) / 2
        marks.append({"kind": cp["kind"], "index": cp["index"], "x": at(x),
                      "label": cp_label(cp, points[cp["index"]]),
                      "lx": at(x - 4 if right else x + 4), "ly": at(TOP + 10 + 12 * (k % 4)),
                      "anchor": "end" if right else "start"})
    return marks


def plot(s: dict, cps: list[dict], run_index: dict[str, int]) -> dict:
    """One series' SVG: the whiskers and the line (in a group whose x unit is one run),
    axes, change points (placed in the plot's own units, independently of that group),
    and the data the tooltip reads (values, invocation counts, run numbers, the x grid)."""
    points = s["points"]
    xs = x_positions(len(points))
    step = xs[1] - xs[0] if len(xs) > 1 else 1.0
    lo, hi = value_range(points)
    y = _y(lo, hi)
    counts = [str(len(p["values"])) for p in points]
    radius = DOT if step >= DENSE else DOT / 2
    drawn = [finite(p) for p in points]
    return {
        "whiskers": whisker_path([y(max(v)) if v else None for v in drawn],
                                 [y(min(v)) if v else None for v in drawn]),
        "line": line_path([y(p["value"]) if math.isfinite(p["value"]) else None
                           for p in points]),
        "x0": repr(xs[0]), "dx": repr(step),
        # A point's radii in the group's units: the group stretches x by `step`.
        "dot": (repr(round(radius / step, 6)), repr(radius)),
        "x_ticks": x_ticks(points, xs),
        "y_ticks": [(at(y(v)), c.fmt(v)) for v in nice_ticks(lo, hi)],
        "levels": levels(cps, xs, y),
        "cps": cp_marks(cps, points, xs),
        "v": " ".join(c.fmt(p["value"], blank="NaN") for p in points),
        "n": counts[0] if len(set(counts)) == 1 else " ".join(counts),
        "r": ranges([run_index[p["run_id"]] for p in points]),
        "lo": repr(lo), "hi": repr(hi),
    }


def judgement(det: dict | None) -> tuple[list[dict], str | None]:
    """A series' change points in order and, where it was not judged, why."""
    if det is None:
        return [], "not judged: change-point detection was not run for this page"
    cps = sorted(det.get("change_points") or [], key=lambda cp: cp["index"])
    if det.get("judged", True):
        return cps, None
    return cps, f"not judged: {det.get('reason') or 'no reason given'}"


def section(s: dict, det: dict | None, run_index: dict[str, int],
            newest: bool = True) -> dict:
    """Everything one series' section shows; `newest`: the newest configuration of its
    case and metric (or its only one), which keeps the plain anchor."""
    cps, note = judgement(det)
    points, unit = s["points"], s.get("unit") or ""
    last = points[-1]
    kinds = {cp["kind"] for cp in cps}
    return {
        "anchor": anchor(s["case_id"], s["metric"],
                         None if newest else s.get("config") or ""),
        "id": s["id"], "case_id": s["case_id"], "config": s.get("config_label") or "",
        "new_config": new_config_text(s),
        "metric": s["metric"], "unit": unit, "direction": s.get("direction", "lower"),
        "runs": len(points), "has_cp": bool(cps),
        "rank": min((ORDER.get(k, 2) for k in kinds), default=3),
        "latest": f"{c.fmt(last['value'])} {unit}".strip(),
        "latest_at": f"{last['time']}, {last['head_sha'][:8] or 'no commit'}"
                     + (f" on {last['head_branch']}" if last["head_branch"] else ""),
        "cps": [{"kind": cp["kind"], "label": cp_label(cp, points[cp["index"]]),
                 "detail": cp_detail(cp, points, unit)} for cp in cps],
        "note": note,
        "left_out": left_out_text(points, (det or {}).get("outliers") or []),
        "plot": plot(s, cps, run_index),
    }


def new_config_text(s: dict) -> str | None:
    """Where a series is a configuration that began after another of its case and
    metric: said, so that the start of the plot reads as a new series, not a step."""
    new = s.get("new_config")
    if not new:
        return None
    after = f" after [{new['previous']}]" if new.get("previous") else ""
    return (f"A new measurement configuration from {new['time']} "
            f"({new['head_sha'][:8] or 'run ' + new['run_id']}){after}: a series of its "
            "own, never compared with the runs before it")


def left_out_text(points: list[dict], outliers: list[int] = ()) -> str | None:
    """The runs the protocol found disturbed by outside load: used to find changes
    with their wider spread, except those left out as outliers among their neighbours
    (history/detect.py; drawn with the others, said here, never a step)."""
    disturbed = [i for i, p in enumerate(points) if not p.get("clean", True)]
    if not disturbed:
        return None
    text = (f"{len(disturbed)} run(s) disturbed by outside load, used with their wider "
            f"spread: run {ranges([i + 1 for i in disturbed])}")
    if outliers:
        text += (f"; left out as outliers among their neighbours: run "
                 f"{ranges([i + 1 for i in sorted(outliers)])}")
    return text


def runs(series: list[dict]) -> list[dict]:
    """Every run any series has, in run order: what a point's tooltip says of its run
    (hosts and versions of all its points: one run may span runners)."""
    by_id: dict[str, dict] = {}
    for s in series:
        for p in s["points"]:
            run = by_id.setdefault(p["run_id"], {
                "key": (p["timestamp"], p["run_id"]), "run_id": p["run_id"],
                "time": p["time"], "sha": p["head_sha"], "branch": p["head_branch"],
                "repo": p["repo"], "hosts": {}, "versions": {}})
            run["hosts"][p["host"] or "?"] = None
            run["versions"].update(p["versions"] or {})
    out = sorted(by_id.values(), key=lambda run: run["key"])
    for run in out:
        run["hosts"] = ", ".join(run["hosts"])
        run["versions"] = ", ".join(f"{k} {v}" for k, v in sorted(run["versions"].items()) if v)
    return out


def header(meta: dict, all_runs: list[dict], detection: dict | None, n: int) -> list:
    """(name, value) of the page's header: the store, its runs, how they were judged."""
    def run_text(run):
        return f"{run['time']} ({run['sha'][:12] or 'no commit'})"

    # What detection ran with (its Settings, the seed included), else the suite's.
    settings = (detection or {}).get("settings") or meta.get("settings") or {}
    items = [("Store", meta.get("store", "?")),
             ("Generated", meta.get("generated_at")
              or datetime.now(UTC).isoformat(timespec="seconds")),
             ("Runs", f"{len(all_runs)} runs, {n} series"),
             ("First run", run_text(all_runs[0]) if all_runs else "none"),
             ("Last run", run_text(all_runs[-1]) if all_runs else "none"),
             ("Detection", ", ".join(f"{k} {v}" for k, v in settings.items())
              if detection is not None else "not run")]
    return [(k, str(v)) for k, v in items]


def render(series: list[dict], detection: dict | None, meta: dict) -> str:
    """The page: `series` as history/query.series gives them, `detection` as
    history/detect.detect_series does ({"settings", "series": [{"series": id, "judged",
    "reason", "change_points"}, ...], ...}; None: not run), `meta` the store's location
    ("store"), when ("generated_at") and the suite's detection settings ("settings")."""
    series = [s for s in series if s["points"]]
    all_runs = runs(series)
    run_index = {run["run_id"]: i for i, run in enumerate(all_runs)}
    found = {entry["series"]: entry for entry in (detection or {}).get("series") or []}
    # The newest configuration of each case and metric keeps the plain anchor.
    newest: dict[tuple[str, str], dict] = {}
    for s in series:
        key, last = (s["case_id"], s["metric"]), s["points"][-1]
        held = newest.get(key)
        if held is None or (last["timestamp"], last["run_id"]) > (
                held["points"][-1]["timestamp"], held["points"][-1]["run_id"]):
            newest[key] = s
    sections = sorted((section(s, found.get(s["id"]) if detection is not None else None,
                               run_index, newest[(s["case_id"], s["metric"])] is s)
                       for s in series),
                      key=lambda x: (x["rank"], x["id"]))
    # One point marker per distinct run spacing (a marker is drawn in its line's
    # stretched units, so its ellipse is a circle on the page only for that spacing).
    dots = sorted({x["plot"]["dot"] for x in sections})
    for x in sections:
        x["plot"]["marker"] = f"pt{dots.index(x['plot']['dot'])}"
    return templating.render(
        "history.html.j2", meta=header(meta, all_runs, detection, len(sections)),
        sections=sections, runs=all_runs, width=WIDTH, height=HEIGHT, dots=dots,
        box={"left": LEFT, "right": RIGHT, "top": TOP, "bottom": BOTTOM},
        with_cp=sum(1 for x in sections if x["has_cp"]),
        regressions=sum(1 for x in sections if x["rank"] == 0))
