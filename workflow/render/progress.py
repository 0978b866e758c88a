"""What a run says while it works and when it ends (issue 24): one event per finished
case or A/B row, an ETA after each finished job, and a summary. Pure: events are dicts
(the JSON mode prints them as they are), and each has one line of text for a reader. The
Snakemake logger plugin (snakemake_logger_plugin_benchflow) prints them; what they are
made from is read by workflow/commands/progress.py.

Statuses, intervals and verdicts are the reports' own (render/common.py), so a case
reads the same here as in report.md."""

from __future__ import annotations

from collections import Counter

from workflow.render import common as c
from workflow.render.ab import workload_cell
from workflow.stats.enums import ABVerdict, Status
from workflow.stats.ratio_text import ratio_text


def case_reason(case: dict) -> str:
    """Why a case is not plainly ok, on one line; '' for an ok case."""
    st = c.status(case)
    if c.regressions(case):
        return c.regression_text(case)
    if st == c.DEGRADED:
        return "; ".join(c.degraded_reasons(case))
    if st == Status.FAILED:
        return c.error_summary(case.get("error"))
    if st in (Status.UNSUPPORTED, Status.SKIPPED, Status.COMPILE_ONLY):
        return c.skip_reason(case)
    return ""


def case_event(case: dict) -> dict:
    """A finished case: its id, reader-facing status, median and 95% interval (ms), CV
    and noisy flag, golden verdict (None without a golden section) and reason."""
    timing = c.section(case, "timing")
    timed = c.median_ms(case) is not None
    return {"event": "case", "id": case["id"], "status": c.status(case),
            "median_ms": c.median_ms(case),
            "ci95_ms": timing.get("ci95_ms") if timed else None,
            "interval": c.interval_text(case),
            "cv": timing.get("cv") if timed else None,
            "noisy": bool(timing.get("noisy")) if timed else False,
            "verdict": c.section(case, "golden").get("verdict"),
            "verdict_text": c.verdict_text(case),
            "reason": case_reason(case),
            "invocations": timing.get("invocations") if timed else None,
            "stop_reason": timing.get("stop_reason") if timed else None,
            "cost": case.get("cost")}


# The phases a case line names, in the order they run (the record's `cost`).
PHASES = (("worker_start_s", "start"), ("export_s", "export"), ("build_s", "build"),
          ("quantize_s", "quantize"), ("compile_s", "compile"), ("first_call_s", "first call"),
          ("accuracy_s", "accuracy"), ("profile_s", "profile"), ("warmup_s", "warm-up"),
          ("timed_s", "timed"), ("invocations_s", "invocations"), ("graph_s", "graph"))


def cost_text(cost: dict | None) -> str:
    """'8.8 s: start 1.5, compile 0.3, warm-up 1.0, timed 3.2, profile 0.0': where the
    case's time went, the phases of a tenth of a second or more (all of torch's warm-up
    and timed work are inside its invocations, which are named only for IREE)."""
    if not cost or cost.get("total_s") is None:
        return ""
    torch_split = cost.get("timed_s") is not None
    parts = [f"{label} {cost[key]:.1f}" for key, label in PHASES
             if cost.get(key) is not None and cost[key] >= 0.1
             and not (torch_split and key == "invocations_s")]
    return f"{cost['total_s']:.1f} s" + (f": {', '.join(parts)}" if parts else "")


def case_text(event: dict) -> str:
    """'ok        cpu/iree/linear-16x32x32-f32/baseline  0.01 [0.009, 0.011] ms  (7 inv.,
    width-reached)  golden: pass ×1.002  took 3.1 s: compile 0.4, invocations 2.5'; a
    reason after an em dash where there is one."""
    text = f"{event['status']:<12} {event['id']}"
    if event["median_ms"] is not None:
        text += f"  {event['interval']} ms" + ("  noisy" if event["noisy"] else "")
    if event.get("invocations"):
        text += f"  ({event['invocations']} inv., {event['stop_reason']})"
    if event["verdict"] is not None:
        text += f"  golden: {event['verdict_text']}"
    if event.get("cost") and cost_text(event["cost"]):
        text += f"  took {cost_text(event['cost'])}"
    if event["reason"]:
        text += f"  — {event['reason']}"
    return text


def ab_event(row: dict) -> dict:
    """A finished A/B row: base → new, workload, ratio (new / base), its interval and
    level, the verdict; a failed row's stage and error instead of numbers."""
    failed = row["verdict"] == ABVerdict.FAILED
    return {"event": "ab", "base": row["base"], "new": row["new"],
            "workload": workload_cell(row), "verdict": row["verdict"],
            "ratio": None if failed else row.get("ratio"),
            "ci95": None if failed else (row.get("ci95") or row.get("ci")),
            "level": None if failed else row.get("level"),
            "rounds": row.get("rounds"),
            "reason": (f"{row.get('failed_stage')}: {c.error_summary(row.get('error'))}"
                       if failed else "")}


def ab_text(event: dict) -> str:
    """'A/B host → generic  linear-...  ×2.896 [2.315, 3.913] at 97.5%  regression'."""
    text = f"A/B {event['base']} → {event['new']}  {event['workload']}"
    if event["ratio"] is not None:
        text += f"  ×{ratio_text(event['ratio'])}"
        ci = event["ci95"]
        text += (f" [{ci[0]:.3f}, {ci[1]:.3f}] at {event['level']:.1%}"
                 if ci and event["level"] else " (no interval: too few rounds)")
    text += f"  {event['verdict']}"
    return text + (f"  — {event['reason']}" if event["reason"] else "")


def eta_event(done: int, total: int, left: dict[str, dict]) -> dict:
    """How long the jobs not yet finished should take, one after another. `left`: per
    rule {"jobs": count left, "seconds": expected seconds per job or None, "basis":
    "rule" (the mean of the rule's jobs finished so far), "plan" (a measuring job's
    `runtime` request, which the rules size from earlier records of the same cases) or
    "run" (the mean of every job finished so far)}. Jobs of a rule with no estimate
    yet are counted, not guessed."""
    known = {r: v for r, v in left.items() if v["jobs"] and v["seconds"] is not None}
    unknown = sum(v["jobs"] for v in left.values() if v["jobs"] and v["seconds"] is None)
    basis = Counter()
    for v in known.values():
        basis[v["basis"]] += v["jobs"]
    return {"event": "eta", "done": done, "total": total,
            "seconds": round(sum(v["jobs"] * v["seconds"] for v in known.values()), 1),
            "jobs_estimated": sum(basis.values()), "jobs_unestimated": unknown,
            "basis": dict(sorted(basis.items()))}


_BASIS_TEXT = {"rule": "this run's jobs of the same rule",
               "plan": "the planned runtime (earlier records of the same cases)",
               "run": "this run's mean job of the same kind"}


def eta_text(event: dict) -> str:
    """'ETA ~2 min (3 of 9 jobs done; 6 left, from: ...)'."""
    left = event["total"] - event["done"]
    head = f"{event['done']} of {event['total']} jobs done"
    if left <= 0:
        return f"ETA: done ({head})"
    if not event["jobs_estimated"]:
        return f"ETA: unknown yet ({head}; {left} left, none of their kind finished yet)"
    parts = [f"{n} from {_BASIS_TEXT[b]}" for b, n in event["basis"].items()]
    if event["jobs_unestimated"]:
        parts.append(f"{event['jobs_unestimated']} not estimated yet")
    return (f"ETA ~{c.duration_text(event['seconds'])} ({head}; {left} left, one after "
            f"another: {', '.join(parts)})")


def summary_event(cases: list[dict], ab_rows: list[dict], *, failed_jobs: list[dict],
                  reports: list[str], success: bool, retried_jobs: list[dict] = ()) -> dict:
    """The run's summary: counts by status and by golden verdict, the cases to act on
    first (regressions, then failures, then degraded: render/common's order) with their
    reasons, the noisy cases, the A/B rows, the failed jobs with their logs (and those
    that failed once and then finished when retried), and the report files."""
    by_status = c.counts(cases)
    by_verdict = Counter(c.section(x, "golden").get("verdict") or "none" for x in cases)
    attention = [x for x in c.ordered(cases)
                 if c.regressions(x) or c.status(x) in (Status.FAILED, c.DEGRADED)]
    return {"event": "summary", "success": success, "cases": len(cases),
            "by_status": {str(k): v for k, v in by_status.items()},
            "by_verdict": dict(sorted(by_verdict.items())),
            "regressions": sum(bool(c.regressions(x)) for x in cases),
            "attention": [{"id": x["id"], "status": c.status(x), "reason": case_reason(x)}
                          for x in attention],
            "noisy": sorted(x["id"] for x in cases
                            if c.median_ms(x) is not None and c.section(x, "timing").get("noisy")),
            "ab": [ab_event(r) for r in ab_rows],
            "failed_jobs": failed_jobs, "retried_jobs": list(retried_jobs),
            "reports": reports}


def summary_lines(event: dict) -> list[str]:
    """The summary block, for a reader: regressions and failures first."""
    counts = ", ".join(f"{n} {s}" for s, n in event["by_status"].items() if n)
    verdicts = ", ".join(f"{n} {v}" for v, n in event["by_verdict"].items())
    ab_bad = [a for a in event["ab"] if a["verdict"] in (ABVerdict.REGRESSION, ABVerdict.FAILED)]
    head = "finished" if event["success"] else "FAILED"
    # A run of A/B pairs only (`benchflow ab`) measured rows, not cases: `0 cases` would
    # read as nothing measured.
    ab_only = event["ab"] and not event["cases"]
    rows = (f"{len(event['ab'])} A/B row{'' if len(event['ab']) == 1 else 's'}, "
            f"{len(ab_bad)} regressed or failed")
    lines = ["", "── benchflow summary " + "─" * 40,
             f"{head}: {rows}" if ab_only else
             f"{head}: {event['cases']} cases" + (f": {counts}" if counts else "")]
    if event["cases"]:
        lines.append(f"golden verdicts: {verdicts}")
    if event["attention"]:
        lines.append(f"to look at ({event['regressions']} regressed, "
                     f"{event['by_status'][Status.FAILED]} failed):")
        lines += [f"  {a['status']:<12} {a['id']}  — {a['reason']}" for a in event["attention"]]
    if event["noisy"]:
        lines.append(f"noisy ({len(event['noisy'])}): " + ", ".join(event["noisy"]))
    if event["ab"]:
        if not ab_only:
            lines.append(f"A/B: {len(event['ab'])} rows, {len(ab_bad)} regressed or failed")
        lines += ["  " + ab_text(a) for a in ab_bad]
    for job in event["failed_jobs"]:
        logs = ", ".join(job["log"]) or "no log file"
        lines.append(f"failed job: {job['rule']} (jobid {job['jobid']}): log {logs}")
    for job in event["retried_jobs"]:
        lines.append(f"retried: {job['rule']} (jobid {job['jobid']}) failed once, then "
                     f"finished; the failed attempt's log: {', '.join(job['log']) or 'none'}")
    if event["reports"]:
        lines.append("reports: " + ", ".join(event["reports"]))
    return lines
