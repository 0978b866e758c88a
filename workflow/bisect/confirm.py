"""`benchflow history confirm`: an alert of the history (a change point `history detect`
found, or a named run against the run before it) measured again as a paired A/B of the
two runs' states, then, confirmed, bisected to its commit.

Across runs the history cannot decide alone: a run's numbers were measured minutes or
days from the runs before it, and on a shared machine a case drifts between runs as
much as the changes worth finding (a disturbed run reads as a step of x1.3). Inside
one run the A/B protocol decides such changes, because both sides are measured
together. So an alert between run A (commit a) and run B (commit b) is confirmed by
what `benchflow ab --base a --new b` does for the alert's case alone
(bisect/suite_ab.compare with the case as its pattern): each commit's tree extracted
(bisect/revisions.py), the case keyed at both, and

- equal content keys, or both commits building the same module byte for byte (a
  renamed variable, a comment): the code did not change the case between the runs,
  so the history's step was the machine's: **refuted**, nothing measured;
- otherwise the interleaved, paired A/B of the two revisions' modules (IREE:
  bisect/measure.measure_pair; torch: comparisons/ab_torch.compare_torch_pair), with the
  suite's `ab` stopping rule (an undecided IREE pair measured once more with twice the
  rounds and seconds, as a bisection's step is): the alert's direction found is
  **confirmed**, no difference (or the other direction) **refuted**, a pair still
  undecided, or failed, **could not confirm**, with why.

A confirmed IREE regression is then, with `bisect`, bisected between the two commits
(bisect/run.run: the search, skips by content, the final pair's attribution), the
confirming pair reused as the bisection's pair of ends. Two runs with the same commit
and the same versions measured the same code: refuted. Runs whose commit is unknown to
the repository, or that differ only in an IREE release, are not confirmed here (why,
and the `benchflow bisect --package` command that would walk the releases).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from workflow.bisect import revisions as git
from workflow.bisect import suite_ab
from workflow.bisect.history import now
from workflow.errors import ConfigError
from workflow.history import detect as detection
from workflow.regression.gate import PASSED, REGRESSED, UNJUDGED
from workflow.render.alerts import paired
from workflow.stats.changepoints import Settings
from workflow.stats.enums import ABVerdict

CONFIRMED, REFUTED, UNCONFIRMED = "confirmed", "refuted", "could-not-confirm"
HEADS = {CONFIRMED: "CONFIRMED", REFUTED: "REFUTED", UNCONFIRMED: "COULD NOT CONFIRM"}
OUTCOME_HEADS = {PASSED: "ok", REGRESSED: "FAIL", UNJUDGED: "COULD NOT JUDGE"}
# `--run newest`: the newest run of the history besides bisection steps.
NEWEST = "newest"


def alerts(series: list[dict], settings: Settings, *, since: str | None = None,
           run: str | None = None) -> tuple[list[dict], list[str], dict]:
    """(the alerts, the lines about series a named run left without one, detection's
    result). Without `run`: every change point at or after `since` (all of them without
    it). With `run` (a run id, or NEWEST): in each series holding it, the run against
    the run before it; an alert where its median moved at least history.min_change
    from that run's, else a line saying it sat at its level. Each alert: {case_id,
    metric, series, kind (regression | improvement), history_ratio, history_ci95 (the
    change point's bootstrap interval; None for a named run), before/after: {run_id,
    head_sha, time, versions}}."""
    result = detection.detect_series(series, settings)
    if run is None:
        since_ts = None if since is None else detection._since_timestamp(result["runs"], since)
        points = {(s["id"], p["run_id"]): p for s in series for p in s["points"]}
        out = []
        for cp in result["change_points"]:
            if since_ts is not None and cp["timestamp"] < since_ts:
                continue
            out.append({
                "case_id": cp["case_id"], "metric": cp["metric"], "series": cp["series"],
                "config_label": cp.get("config_label") or "", "kind": cp["kind"],
                "history_ratio": cp["ratio"], "history_ci95": cp["ci95"], "source":
                f"change point at run {cp['run_id']}",
                "before": _run(points[(cp["series"], cp["previous_run_id"])]),
                "after": _run(points[(cp["series"], cp["run_id"])])})
        return out, [], result
    out, level = _run_alerts(series, settings, result, run)
    return out, level, result


def _run_alerts(series: list[dict], settings: Settings, result: dict,
                run: str) -> tuple[list[dict], list[str]]:
    """alerts()' with a named run: that run against the run before it, per series."""
    wanted = result.get("newest_run") if run == NEWEST else run
    if wanted is None or wanted not in result["runs"]:
        held = f"the newest is {result.get('newest_run')}" if result.get("newest_run") \
            else "it holds none"
        raise ConfigError([f"--run {run!r}: no such run in the history ({held}); expected "
                           f"a run id that `benchflow history show` lists, or {NEWEST!r}"])
    out, level = [], []
    for s in series:
        used = [p for p in s["points"] if not p.get("bisect", False)]
        at = next((i for i, p in enumerate(used) if p["run_id"] == wanted), None)
        if at is None:
            continue
        name = detection.name({"case_id": s["case_id"], "metric": s["metric"],
                               "config_label": s.get("config_label")})
        if at == 0:
            level.append(f"NOTHING TO CONFIRM {name}: run {wanted} is its first run")
            continue
        before, after = used[at - 1], used[at]
        ratio = after["value"] / before["value"] if before["value"] else None
        if ratio is None or abs(ratio - 1) < settings.min_change:
            said = f"x{ratio:.3f}" if ratio is not None else "a run before it at 0"
            level.append(f"NOTHING TO CONFIRM {name}: run {wanted} at {said} of the run "
                         f"before it, within history.min_change ({settings.min_change:g})")
            continue
        worse = ratio > 1 if s["direction"] == "lower" else ratio < 1
        out.append({"case_id": s["case_id"], "metric": s["metric"], "series": s["id"],
                    "config_label": s.get("config_label") or "",
                    "kind": "regression" if worse else "improvement",
                    "history_ratio": ratio, "history_ci95": None,
                    "source": f"run {wanted} against the run before it",
                    "before": _run(before), "after": _run(after)})
    if not out and not level:
        raise ConfigError([f"--run {run!r}: run {wanted} holds no series that matches; "
                           "expected a GLOB over the cases it measured"])
    return out, level


def _run(point: dict) -> dict:
    return {"run_id": point["run_id"], "head_sha": point.get("head_sha") or "",
            "time": point.get("time") or "", "versions": point.get("versions") or {}}


# confirm(alert) -> the alert with its finding; say(line) for progress.
Say = Callable[[str], None]


def confirm(alert: dict, *, repo: Path, suite: Path, cache: Path, bisect: bool,
            say: Say = print) -> dict:
    """The alert with what its paired A/B found (module doc): status, why, and where
    measured: pair (the A/B row: verdict, ratio, ci95, rounds), dispatch (the line of
    the dispatch or op that explains most of the change), bisect (the first bad
    commit, its pair and dispatch, or why there is none)."""
    out = {**alert, "status": UNCONFIRMED, "why": "", "pair": None, "dispatch": None,
           "commits": None, "bisect": None}
    a, b = (alert[side]["head_sha"].removesuffix("-dirty") for side in ("before", "after"))
    if not a or not b:
        which = " and ".join(f"run {alert[s]['run_id']}" for s, sha in
                             (("before", a), ("after", b)) if not sha)
        return {**out, "why": f"{which} names no commit: nothing to measure it at (ingest "
                              "its report from its git checkout, or with --sha)"}
    dirty = [alert[s]["run_id"] for s in ("before", "after")
             if alert[s]["head_sha"].endswith("-dirty")]
    if a == b:
        package = detection.bisect_command(alert["case_id"], alert["before"], alert["after"])
        if package:
            return {**out, "why": f"both runs measured commit {a[:12]} with other releases: "
                                  f"walk the releases with `{package}`"}
        return {**out, "status": REFUTED, "commits": [a, b],
                "why": f"both runs measured commit {a[:12]} with the same versions: the "
                       "code did not change between them, the machine did"}
    try:
        root = git.repo_root(repo)
        rel = git.suite_in_repo(root, suite)
        a, b = git.resolve(root, a, "the earlier run's commit"), \
            git.resolve(root, b, "the later run's commit")
    except ConfigError as exc:
        return {**out, "why": " ".join(exc.problems)}
    out["commits"] = [a, b]
    revs = suite_ab.Revisions(root, rel, a, b)
    say(f"confirming {alert['case_id']}: {revs.label(b)} against {revs.label(a)} ...")
    try:
        doc = suite_ab.compare(revs, cache, pattern=_exact(alert["case_id"]), say=say)
    except ConfigError as exc:
        return {**out, "why": " ".join(exc.problems)}
    note = (f" (run(s) {', '.join(dirty)} measured uncommitted changes on top of their "
            "commit, measured here as committed)" if dirty else "")
    _retry_inconclusive(doc, alert["case_id"], revs, cache, say)
    found = _finding(doc, alert, revs)
    out.update(found, why=found["why"] + note)
    if out["status"] == CONFIRMED and alert["kind"] == "regression" and bisect:
        out["bisect"] = _bisected(alert, revs, suite, cache, out["pair"], say)
    return out


def _retry_inconclusive(doc: dict, cid: str, revs: suite_ab.Revisions, cache: Path,
                        say: Say) -> None:
    """An IREE pair the protocol could not decide measured once more with RETRY_SCALE
    times the rounds and seconds, as a bisection's step is (bisect/search.py), its row
    then in doc's place: undecided after that, it is said, never guessed. The sides'
    builds are the ones compare made (kept by their content key)."""
    from workflow.bisect.measure import measure_pair
    from workflow.bisect.search import RETRY_SCALE

    at = next((i for i, r in enumerate(doc["pairs"]) if r.get("case") == cid), None)
    if at is None or doc["pairs"][at]["verdict"] != ABVerdict.INCONCLUSIVE \
            or doc["pairs"][at].get("kind") != "iree":
        return
    say(f"  inconclusive in {doc['pairs'][at].get('rounds')} rounds: measuring again with "
        f"x{RETRY_SCALE} the rounds and seconds ...")
    built = {sha: suite_ab._built(revs, sha, [cid], cache)[cid]
             for sha in (revs.base, revs.new)}
    measured_at = now()
    step = measure_pair((revs.base, revs.new), (built[revs.base], built[revs.new]),
                        scale=RETRY_SCALE, log=str(cache / "logs" / "ab.log"))
    step.row["measured_at"] = measured_at
    say(f"  {step.verdict}" + (f" x{step.ratio:.3f}" if step.ratio else "")
        + f" in {step.rounds} rounds")
    doc["pairs"][at] = {**step.row, "case": cid, "retried": True}


def _exact(case_id: str) -> str:
    """The case id as an fnmatch pattern that matches it alone."""
    return "".join(f"[{c}]" if c in "*?[]" else c for c in case_id)


def _finding(doc: dict, alert: dict, revs: suite_ab.Revisions) -> dict:
    """{status, why, pair, dispatch} from suite_ab.compare's document for one case."""
    cid = alert["case_id"]
    between = f"{revs.label(revs.base)}..{revs.label(revs.new)}"
    if cid in doc["unchanged"]:
        return {"status": REFUTED, "pair": None, "dispatch": None,
                "why": f"the case's inputs are the same at both commits ({between}): the "
                       "code did not change it, the machine did"}
    if cid in doc["same_module"]:
        return {"status": REFUTED, "pair": None, "dispatch": None,
                "why": f"both commits build the same module byte for byte ({between}; "
                       "their sources differ only in names or comments): the machine "
                       "changed, not the code"}
    for key, what in (("added", "is not in the suite at the earlier commit"),
                      ("removed", "is not in the suite at the later commit"),
                      ("unsupported", "cannot be measured at one of the commits")):
        if cid in doc[key]:
            return {"status": UNCONFIRMED, "pair": None, "dispatch": None,
                    "why": f"the case {what} ({between})"}
    if any(c["case"] == cid for c in doc["compile_only"]):
        return {"status": UNCONFIRMED, "pair": None, "dispatch": None,
                "why": f"compiled only: its device is absent here ({between})"}
    row = next(r for r in doc["pairs"] if r.get("case") == cid)
    pair = {k: row.get(k) for k in ("verdict", "ratio", "rounds", "error")}
    pair["ci95"] = row.get("ci95") or row.get("ci")
    pair["row"] = row
    dispatch = _dispatch(row)
    verdict = row["verdict"]
    said = paired(pair)
    if verdict == ABVerdict.FAILED:
        return {"status": UNCONFIRMED, "pair": pair, "dispatch": None,
                "why": f"the paired A/B failed: {row.get('error')}"}
    if verdict == ABVerdict.INCONCLUSIVE:
        return {"status": UNCONFIRMED, "pair": pair, "dispatch": dispatch,
                "why": f"the paired A/B could not decide ({said}): measure it on a quieter "
                       "machine, or raise the suite's ab.max_rounds and ab.budget_s"}
    if verdict == alert["kind"]:
        return {"status": CONFIRMED, "pair": pair, "dispatch": dispatch,
                "why": f"the paired A/B of the two commits finds it ({said})"}
    return {"status": REFUTED, "pair": pair, "dispatch": dispatch,
            "why": f"the paired A/B of the two commits finds {verdict} ({said}): the "
                   f"history's {alert['kind']} was the machine's"}


def _dispatch(row: dict) -> str | None:
    """The attribution's first line: the dispatch or op that explains most of the change
    (`+0.07 ms (+79 %) main$async_dispatch_1_matmul_64x512x256_f32 explains 88 % ...`)."""
    lines = ((row.get("attribution") or {}).get("lines")) or []
    return lines[0] if lines else None


def _bisected(alert: dict, revs: suite_ab.Revisions, suite: Path, cache: Path,
              pair: dict, say: Say) -> dict:
    """The confirmed regression bisected between the two commits (bisect/run.run), the
    confirming pair given as its pair of ends; {first_bad, outcome, summary, final
    (ratio, ci95, rounds), dispatch, measured} or {error}."""
    from workflow.bisect import run as bisecting
    from workflow.bisect.search import Step

    if pair["row"].get("kind") != "iree":
        return {"error": "bisect measures IREE cases; a torch case's commits are "
                         "walked with `benchflow ab` between them"}
    try:
        source = bisecting.commit_source(revs.repo, suite, revs.base, revs.new, cache)
    except ConfigError as exc:
        return {"error": " ".join(exc.problems)}
    row = pair["row"]
    ends = Step(base=revs.base, new=revs.new, verdict=row["verdict"], ratio=row["ratio"],
                ci=row.get("ci95") or row.get("ci"), rounds=row["rounds"], row=row)
    say(f"bisecting {alert['case_id']} between {revs.label(revs.base)} and "
        f"{revs.label(revs.new)} ...")
    try:
        result = bisecting.run(source, alert["case_id"], cache, say=say,
                               known={(revs.base, revs.new): ends})
    except ConfigError as exc:
        return {"error": " ".join(exc.problems)}
    final = result.get("final") or {}
    return {"first_bad": result["first_bad"], "last_good": result["last_good"],
            "outcome": result["outcome"], "summary": result["summary"],
            "measured": result["measured"],
            "final": {"verdict": final.get("verdict"), "ratio": final.get("ratio"),
                      "ci95": final.get("ci95") or final.get("ci"),
                      "rounds": final.get("rounds")} if final else None,
            "dispatch": _dispatch(final) if final else None,
            "what_changed": (final.get("attribution") or {}).get("what_changed")}


def outcome(found: list[dict], level: list[str]) -> tuple[str, str]:
    """REGRESSED when a regression was confirmed; UNJUDGED when an alert could not be
    confirmed, or there was none and no run was named; else PASSED."""
    count = {s: sum(1 for a in found if a["status"] == s)
             for s in (CONFIRMED, REFUTED, UNCONFIRMED)}
    regressions = sum(1 for a in found if a["status"] == CONFIRMED
                      and a["kind"] == "regression")
    line = (f"{count[CONFIRMED]} confirmed ({regressions} regression(s)), "
            f"{count[REFUTED]} refuted, {count[UNCONFIRMED]} could not be confirmed")
    if regressions:
        return REGRESSED, line
    if count[UNCONFIRMED]:
        return UNJUDGED, line
    if not found and not level:
        return PASSED, "no alert to confirm (no change point; `--run RUN` confirms a run "\
                       "against the one before it)"
    return PASSED, line + (f"; {len(level)} series at the level of the run before"
                           if level else "")
