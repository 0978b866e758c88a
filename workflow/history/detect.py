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
    """Change points of every series with at least settings.min_runs points; the others
    listed as not judged with the reason. Returns {"settings", "series": [per series:
    series, case_id, metric, unit, direction, runs, judged, reason, change_points],
    "change_points": [all, series by series], "runs": {run_id: {timestamp, head_sha}}}
    (runs: what `outcome` resolves a --since run id or commit against)."""
    out, flat, runs = [], [], {}
    for s in series:
        entry = {"series": s["id"], "case_id": s["case_id"], "metric": s["metric"],
                 "unit": s.get("unit", ""), "direction": s["direction"],
                 "runs": len(s["points"]), "judged": False, "reason": None,
                 "change_points": []}
        for p in s["points"]:
            runs.setdefault(p["run_id"], {"timestamp": p["timestamp"],
                                          "head_sha": p.get("head_sha") or ""})
        clean = sum(1 for p in s["points"] if _located_on(p))
        entry["left_out"] = len(s["points"]) - clean
        if clean < settings.min_runs:
            entry["reason"] = f"{len(s['points'])} runs, needs {settings.min_runs}" + (
                f" clean ones ({entry['left_out']} disturbed or bisection steps)"
                if entry["left_out"] else "")
        else:
            entry["judged"] = True
            entry["change_points"] = _series_change_points(s, settings)
        out.append(entry)
        flat.extend(entry["change_points"])
    return {"settings": asdict(settings), "series": out, "change_points": flat,
            "runs": runs}


def _located_on(point: dict) -> bool:
    """Whether a change may be located on this point: not a run disturbed by outside
    load, nor a bisection's step (a past revision measured today: among the nightly
    runs by time, it would read as steps back and forth; query.BISECT_RUN)."""
    return point.get("clean", True) and not point.get("bisect", False)


def _series_change_points(s: dict, settings: Settings) -> list[dict]:
    """Change points among the clean points (a run the protocol marked disturbed by
    outside load is left out: on this shared machine half of the runs 1.4x slower than
    their case's median were so marked, and two of them one after the other read as a
    step); each one's index is then the point's in the whole series."""
    points = [p for p in s["points"] if _located_on(p)]
    values = [p["values"] or [p["value"]] for p in points]
    cps = changepoints.detect(values, direction=s["direction"], settings=settings)
    where = {id(p): i for i, p in enumerate(s["points"])}
    for cp in cps:
        at, prev = points[cp["index"]], points[cp["index"] - 1]
        cp["index"] = where[id(at)]
        cp.update({"series": s["id"], "case_id": s["case_id"], "metric": s["metric"],
                   "run_id": at["run_id"], "time": at["time"],
                   "timestamp": at["timestamp"], "head_sha": at.get("head_sha") or "",
                   "previous_run_id": prev["run_id"],
                   "previous_sha": prev.get("head_sha") or ""})
        cp["bisect"] = bisect_command(s["case_id"], prev, at)
    return cps


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


def outcome(result: dict, since: str | None = None) -> tuple[str, list[str]]:
    """The gate's outcome over detect_series' result and the lines to print: one per
    change point at or after `since` (a run id, a commit sha prefix or an ISO
    date/time; None: every one), one per series not judged, then the verdict.
    REGRESSED when a regression is among them; UNJUDGED when no series was judged."""
    since_ts = None if since is None else _since_timestamp(result["runs"], since)
    cps = [cp for cp in result["change_points"]
           if since_ts is None or cp["timestamp"] >= since_ts]
    lines = []
    for cp in cps:
        lines.append(change_point_line(cp))
        if cp.get("bisect"):
            lines.append(f"  to find its cause: {cp['bisect']}")
    lines += [f"NOT JUDGED {e['case_id']} {e['metric']}: {e['reason']}"
              for e in result["series"] if not e["judged"]]
    judged = sum(e["judged"] for e in result["series"])
    regressions = sum(cp["kind"] == "regression" for cp in cps)
    verdict = REGRESSED if regressions else PASSED if judged else UNJUDGED
    when = f" since {since}" if since else ""
    lines.append(f"{HEADS[verdict]}: {regressions} regression(s) and "
                 f"{len(cps) - regressions} improvement(s){when} in {judged} series "
                 f"judged, {len(result['series']) - judged} not judged")
    return verdict, lines


def change_point_line(cp: dict) -> str:
    """REGRESSED <case> <metric>: +31.2 % [28.9, 33.4] at run <run_id> (<sha8>, <time>)
    after <n> runs, confidence 1.000, p=3e-12 (IMPROVED for an improvement)."""
    head = "REGRESSED" if cp["kind"] == "regression" else "IMPROVED"
    lo, hi = (100 * (r - 1) for r in cp["ci95"])
    sha = cp["head_sha"][:8] or "no commit"
    return (f"{head} {cp['case_id']} {cp['metric']}: {cp['change_percent']:+.1f} % "
            f"[{lo:.1f}, {hi:.1f}] at run {cp['run_id']} ({sha}, {cp['time']}) after "
            f"{cp['runs_before']} runs, confidence {cp['confidence']:.3f}, "
            f"p={cp['p_value']:.0e}")


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
