"""`benchflow history detect`'s work on series from the store (history/query.py's
shape): each series' change points (stats/changepoints.py) with the runs they happened
at, and the gate's outcome over them (regression/gate.py's names, so that the command
exits as `check` and `ab` do: cli/options.EXIT_CODES).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict
from datetime import UTC, datetime

from workflow.errors import ConfigError
from workflow.regression.gate import PASSED, REGRESSED, UNJUDGED
from workflow.stats import changepoints
from workflow.stats.changepoints import Settings

HEADS = {PASSED: "ok", REGRESSED: "FAIL", UNJUDGED: "COULD NOT JUDGE"}
# git's shortest abbreviation: a shorter prefix names too many commits to mean one.
MIN_SHA_PREFIX = 4
SINCE_EXPECTED = ("expected a run id (16 hex), a commit's sha (at least 4 hex) or an "
                  "ISO date/time (2026-11-24, 2026-11-24T10:00:00Z)")


def detect_series(series: list[dict], settings: Settings) -> dict:
    """Change points of every series with at least settings.min_runs points besides
    bisection steps; the others listed as not judged with the reason. A series is one
    measurement configuration's runs of a case and metric (history/query.series), so a
    change of configuration is never a change point: the new configuration is a series
    of its own, judged once it has its own runs. Returns {"settings", "series": [per
    series: series, case_id, metric, config, config_label, new_config, unit, direction,
    runs, judged, reason, unjudged (why, as a word: "runs" too few runs, "bisect" too
    few besides bisection steps), left_out (bisection steps), disturbed (runs disturbed
    by outside load, used), outliers (the indices of disturbed runs left out as
    outliers among their neighbours), change_points], "change_points":
    [all, series by series], "runs": {run_id: {timestamp, head_sha, time}} (runs: what
    `outcome` resolves a --since run id or commit against), "pending": the runs no
    change point could be at yet in some judged series (_pending, pending_runs),
    "newest_run" (besides bisection steps), "newest_judged" (whether some judged series
    could have had a change at it)}. Each series also says its "pending" run ids."""
    out, flat, runs, nightly, judged_runs = [], [], {}, set(), set()
    for s in series:
        entry = {"series": s["id"], "case_id": s["case_id"], "metric": s["metric"],
                 "config": s.get("config") or "", "config_label": s.get("config_label") or "",
                 "new_config": s.get("new_config"),
                 "unit": s.get("unit", ""), "direction": s["direction"],
                 "runs": len(s["points"]), "judged": False, "reason": None,
                 "unjudged": None, "change_points": []}
        for p in s["points"]:
            runs.setdefault(p["run_id"], {"timestamp": p["timestamp"],
                                          "head_sha": p.get("head_sha") or "",
                                          "time": p.get("time") or ""})
        used = [p for p in s["points"] if _located_on(p)]
        nightly.update(p["run_id"] for p in used)
        entry["pending"] = []
        judged_points = []
        entry["left_out"] = len(s["points"]) - len(used)
        entry["disturbed"] = sum(1 for p in used if not p.get("clean", True))
        entry["outliers"] = []
        if len(used) < settings.min_runs:
            at = " at this configuration" if entry["config_label"] else ""
            entry["unjudged"] = "bisect" if len(s["points"]) >= settings.min_runs else "runs"
            entry["reason"] = f"{len(s['points'])} runs{at}, needs {settings.min_runs}" + (
                f" besides bisection steps ({entry['left_out']} bisection steps)"
                if entry["left_out"] else "")
            if s.get("new_config"):
                entry["reason"] += f"; a new configuration since run {s['new_config']['run_id']}"
        else:
            entry["judged"] = True
            entry["change_points"], entry["outliers"] = _series_change_points(s, settings)
            entry["pending"] = _pending(used, entry["outliers"], s["points"],
                                        settings.min_side_runs)
            judged_points = [p["run_id"] for p in used if p["run_id"] not in entry["pending"]]
        judged_runs.update(judged_points)
        out.append(entry)
        flat.extend(entry["change_points"])
    return {"settings": asdict(settings), "series": out, "change_points": flat,
            "runs": runs, "pending": pending_runs(out, runs),
            "newest_run": (newest := _newest(runs, nightly)),
            "newest_judged": newest is not None and newest in judged_runs}


def _pending(used: list[dict], outliers: list[int], points: list[dict],
             min_side_runs: int) -> list[str]:
    """The run ids of a judged series' newest runs that no change point could be at
    yet: a step needs min_side_runs runs after it (stats/changepoints.py), so the last
    min_side_runs - 1 runs detection used, and any run after the last that could start
    one (a disturbed outlier at the end included), are not judged until later runs
    come. Saying "ok" of them would say a change there was looked for."""
    where = {id(p): i for i, p in enumerate(points)}
    left_out = set(outliers)
    kept = [p for p in used if where[id(p)] not in left_out]
    if len(kept) < min_side_runs:
        return [p["run_id"] for p in used]
    last = where[id(kept[len(kept) - min_side_runs])]
    return [p["run_id"] for p in used if where[id(p)] > last]


def pending_runs(entries: list[dict], runs: dict) -> list[dict]:
    """The runs not judged yet in some judged series, oldest first: [{run_id,
    head_sha, time, timestamp, series (how many)}]."""
    count: dict[str, int] = {}
    for e in entries:
        for run_id in e.get("pending") or []:
            count[run_id] = count.get(run_id, 0) + 1
    return [{"run_id": r, **runs[r], "series": n}
            for r, n in sorted(count.items(), key=lambda kv: (runs[kv[0]]["timestamp"], kv[0]))]


def _newest(runs: dict, nightly: set) -> str | None:
    """The newest run besides bisection steps (what a nightly's detect is about)."""
    held = [r for r in runs if r in nightly]
    return max(held, key=lambda r: (runs[r]["timestamp"], r)) if held else None


def _located_on(point: dict) -> bool:
    """Whether a change may be located on this point: not a bisection's step (a past
    revision measured today: among the nightly runs by time, it would read as steps back
    and forth; query.BISECT_RUN). A run disturbed by outside load is used
    (_series_change_points)."""
    return not point.get("bisect", False)


def _series_change_points(s: dict, settings: Settings) -> tuple[list[dict], list[int]]:
    """(change points, outliers) among the points besides bisection steps; each index is
    then the point's in the whole series. A run the protocol marked disturbed by outside
    load is used with its own, wider spread of invocations, unless it is an outlier
    among its neighbours (stats/changepoints.disturbed_outliers: then it is drawn, not
    used). Leaving every disturbed run out, as this did first, judged nothing on a
    machine other work shares, where every run is marked. What that rule guarded
    against (on this 2-core machine half of the runs 1.4x slower than their case's
    median were marked, and two of them one after the other read as a step on the run
    medians) the outlier filter, min_side_runs and the bootstrap's resampling of runs
    guard against now (stats/changepoints.py)."""
    points = [p for p in s["points"] if _located_on(p)]
    values = [p["values"] or [p["value"]] for p in points]
    disturbed = [not p.get("clean", True) for p in points]
    cps = changepoints.detect(values, direction=s["direction"], settings=settings,
                              disturbed=disturbed)
    where = {id(p): i for i, p in enumerate(s["points"])}
    outliers = [where[id(points[i])]
                for i in changepoints.disturbed_outliers(values, disturbed)]
    for cp in cps:
        at, prev = points[cp["index"]], _previous(points, cp["index"], outliers, where)
        cp["index"] = where[id(at)]
        cp.update({"series": s["id"], "case_id": s["case_id"], "metric": s["metric"],
                   "config": s.get("config") or "",
                   "config_label": s.get("config_label") or "",
                   "run_id": at["run_id"], "time": at["time"],
                   "timestamp": at["timestamp"], "head_sha": at.get("head_sha") or "",
                   "previous_run_id": prev["run_id"],
                   "previous_sha": prev.get("head_sha") or ""})
        cp["bisect"] = bisect_command(s["case_id"], prev, at)
    return cps, outliers


def _previous(points: list[dict], index: int, outliers: list[int], where: dict) -> dict:
    """The last run before points[index] that detection used (not an outlier left out)."""
    left_out = set(outliers)
    for p in reversed(points[:index]):
        if where[id(p)] not in left_out:
            return p
    return points[index - 1]


# The packages `benchflow bisect --package` walks, by the name a run's versions give them
# (query.versions: the report's provenance versions).
BISECT_PACKAGES = {"iree": "iree-base-compiler", "iree-base-compiler": "iree-base-compiler",
                   "iree-base-runtime": "iree-base-runtime"}


def bisect_command(case_id: str, before: dict, at: dict) -> str | None:
    """The `benchflow bisect` command that would find the cause of a change between two
    runs: over commits when both runs name theirs and they differ, else over the
    releases of an IREE package whose version differs; None when neither tells (the
    suite is the one the runs measured: SUITE stands for it)."""
    a, b = (before.get("head_sha") or "").removesuffix("-dirty"), \
        (at.get("head_sha") or "").removesuffix("-dirty")
    # Quoted: the ids and versions come from the store, and a reader pastes the line
    # into a shell.
    q = shlex.quote
    if a and b and a != b:
        return f"benchflow bisect {q(case_id)} --good {q(a)} --bad {q(b)} --configfile SUITE"
    va, vb = before.get("versions") or {}, at.get("versions") or {}
    for name, package in BISECT_PACKAGES.items():
        if va.get(name) and vb.get(name) and va[name] != vb[name]:
            return (f"benchflow bisect {q(case_id)} --package {package} --good "
                    f"{q(va[name])} --bad {q(vb[name])} --configfile SUITE")
    return None


def name(entry: dict) -> str:
    """A series in a line: `case metric`, and its configuration where its case and
    metric have runs at several (`case metric [threads=2,...]`)."""
    label = entry.get("config_label")
    return f"{entry['case_id']} {entry['metric']}" + (f" [{label}]" if label else "")


def outcome(result: dict, since: str | None = None) -> tuple[str, list[str]]:
    """The gate's outcome over detect_series' result and the lines to print: one per
    change point at or after `since` (a run id, a commit sha prefix or an ISO
    date/time; None: every one), one per new measurement configuration there (a series
    of its own, never a change point), one per series not judged, then the verdict.
    REGRESSED when a regression is among them; UNJUDGED when no series was judged, and
    then the verdict says why."""
    since_ts = None if since is None else _since_timestamp(result["runs"], since)
    cps = [cp for cp in result["change_points"]
           if since_ts is None or cp["timestamp"] >= since_ts]
    lines = []
    for cp in cps:
        lines.append(change_point_line(cp))
        if cp.get("bisect"):
            lines.append(f"  to find its cause: {cp['bisect']}")
    lines += new_configuration_lines(result, since_ts)
    lines += [f"NOT JUDGED {name(e)}: {e['reason']}"
              for e in result["series"] if not e["judged"]]
    lines += pending_lines(result)
    judged = sum(e["judged"] for e in result["series"])
    regressions = sum(cp["kind"] == "regression" for cp in cps)
    # A --since after every run leaves no run to judge: "passed" would say that runs
    # since then were looked at and found fine, when there are none.
    after = since_ts is None or any(r["timestamp"] >= since_ts
                                    for r in result["runs"].values())
    newest = result.get("newest_run")
    # The newest run where no judged series could have a change at it (a step needs
    # runs after it; a run only in series too short to judge): "ok" would say it was.
    newest_pending = newest is not None and not result.get("newest_judged", True)
    verdict = (REGRESSED if regressions else PASSED if judged and after
               and not newest_pending else UNJUDGED)
    when = f" since {since}" if since else ""
    if verdict == UNJUDGED and judged and after:
        lines.append(f"{HEADS[verdict]}: the newest run {newest} is not judged yet (no "
                     f"judged series could have a change at it: one needs "
                     f"{result['settings']['min_side_runs']} runs "
                     f"after it); {regressions} regression(s) and "
                     f"{len(cps) - regressions} improvement(s){when} in {judged} series "
                     f"judged up to the runs before it; confirm it now with "
                     f"`benchflow history confirm --run {newest}`")
    elif verdict == UNJUDGED and not after:
        lines.append(f"{HEADS[verdict]}: 0 series judged: no run at or after --since "
                     f"{since} (the latest is {_latest(result['runs'])}); expected a "
                     "--since at or before a run the history holds")
    elif verdict == UNJUDGED:
        lines.append(f"{HEADS[verdict]}: 0 series judged: {why_unjudged(result)}")
    else:
        lines.append(f"{HEADS[verdict]}: {regressions} regression(s) and "
                     f"{len(cps) - regressions} improvement(s){when} in {judged} series "
                     f"judged, {len(result['series']) - judged} not judged")
    return verdict, lines


def pending_lines(result: dict) -> list[str]:
    """One line for the runs no change point could be at yet (pending_runs), newest
    last, the newest named as such."""
    pending = result.get("pending") or []
    if not pending:
        return []
    need = result["settings"]["min_side_runs"]
    names = [f"{r['run_id']} ({r['head_sha'][:8] or 'no commit'}, {r['time']})"
             + (", the newest" if r["run_id"] == result.get("newest_run") else "")
             for r in pending]
    return [f"NOT JUDGED YET run(s) {'; '.join(names)}: a change point needs {need} runs "
            f"after it, so a change there is not looked for until later runs come "
            f"(`benchflow history confirm --run RUN` measures one against the run before "
            f"it now)"]


def _latest(runs: dict) -> str:
    if not runs:
        return "none"
    run_id, run = max(runs.items(), key=lambda kv: (kv[1]["timestamp"], kv[0]))
    when = datetime.fromtimestamp(run["timestamp"], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"run {run_id} at {when}"


def why_unjudged(result: dict) -> str:
    """Why no series was judged, counted by reason: `3 have fewer than 4 runs at one
    configuration (2 of them a new configuration), 1 fewer than 4 besides bisection
    steps`."""
    need = result["settings"]["min_runs"]
    entries = [e for e in result["series"] if not e["judged"]]
    if not entries:
        return "no series"
    parts = []
    few = [e for e in entries if e.get("unjudged") != "bisect"]
    if few:
        new = sum(1 for e in few if e.get("new_config"))
        verb = "has" if len(few) == 1 else "have"
        parts.append(f"{len(few)} {verb} fewer than {need} runs at one configuration"
                     + (f" ({new} of them a new configuration)" if new else ""))
    bisect = len(entries) - len(few)
    if bisect:
        parts.append(f"{bisect} {'has' if bisect == 1 else 'have'} fewer than {need} "
                     "runs besides bisection steps")
    return ", ".join(parts)


def new_configuration_lines(result: dict, since_ts: int | None = None) -> list[str]:
    """One line per measurement configuration that started at a run (at or after
    since_ts): its series begin anew there, compared with none of their earlier runs
    (x1.7 between 1 thread and 2 is no change point)."""
    groups: dict[tuple, list[dict]] = {}
    for e in result["series"]:
        new = e.get("new_config")
        if new and (since_ts is None or new["timestamp"] >= since_ts):
            key = (e["config_label"], new["previous"], new["run_id"])
            groups.setdefault(key, []).append(e)
    lines = []
    for (label, previous, run_id), entries in sorted(
            groups.items(), key=lambda kv: (kv[1][0]["new_config"]["timestamp"], kv[0])):
        new = entries[0]["new_config"]
        sha = new["head_sha"][:8] or "no commit"
        what = (f"{name(entries[0])} starts" if len(entries) == 1
                else f"{len(entries)} series ({name(entries[0])}, ...) start")
        after = f", after [{previous}]" if previous else ""
        lines.append(f"NEW CONFIGURATION [{label}] from run {run_id} ({sha}, {new['time']})"
                     f"{after}: {what} anew there, not compared with the runs before")
    return lines


def change_point_line(cp: dict) -> str:
    """REGRESSED <case> <metric>: +31.2 % [28.9, 33.4] at run <run_id> (<sha8>, <time>)
    after <n> runs, confidence 1.000, p=3e-12 (IMPROVED for an improvement); the
    configuration after the metric where the case has several, and how many of the
    runs were disturbed by outside load where any was."""
    head = "REGRESSED" if cp["kind"] == "regression" else "IMPROVED"
    lo, hi = (100 * (r - 1) for r in cp["ci95"])
    sha = cp["head_sha"][:8] or "no commit"
    disturbed = cp.get("disturbed_before", 0) + cp.get("disturbed_after", 0)
    note = (f"; {disturbed} of {cp['runs_before'] + cp['runs_after']} runs disturbed by "
            "outside load" if disturbed else "")
    return (f"{head} {name(cp)}: {cp['change_percent']:+.1f} % "
            f"[{lo:.1f}, {hi:.1f}] at run {cp['run_id']} ({sha}, {cp['time']}) after "
            f"{cp['runs_before']} runs, confidence {cp['confidence']:.3f}, "
            f"p={cp['p_value']:.0e}{note}")


def _since_timestamp(runs: dict, since: str) -> int:
    """The unix time `since` names: a run's, the first run of a commit's, or a date's
    (UTC when it names no zone). ConfigError when it names none of them."""
    if since in runs:
        return runs[since]["timestamp"]
    s = since.lower()
    if re.fullmatch(r"[0-9a-f]+", s) and len(s) >= MIN_SHA_PREFIX:
        hits: dict[str, int] = {}  # sha -> its first run's time
        for r in runs.values():
            if r["head_sha"].lower().startswith(s):
                hits[r["head_sha"]] = min(r["timestamp"], hits.get(r["head_sha"], r["timestamp"]))
        if len(hits) > 1:
            raise ConfigError([f"--since: {since!r} is the start of {len(hits)} commits' "
                               f"shas; {SINCE_EXPECTED} that names one"])
        if hits:
            return next(iter(hits.values()))
    try:
        when = datetime.fromisoformat(since)
    except ValueError:
        raise ConfigError([f"--since: {since!r} is no run id or commit in the history "
                           f"and no date; {SINCE_EXPECTED}"]) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp())
