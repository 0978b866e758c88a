"""The summary block as the logger prints it: render/progress.py's lines, with what the
run's end adds (issue 45, "the terminal tells the truth"): an interrupted run's line,
the cases disturbed by outside load and what that means, and report files that are not
this run's named as an earlier run's. The fields come from commands/progress.py's
`Progress.summary`; like render/progress.py, this is pure."""

from __future__ import annotations

from workflow.render import progress as render

# What the protocol's `timing.disturbed` means for a reader (docs/reports.md,
# stats/verdict.py's _disturbed, docs/history.md's "Disturbed runs").
DISTURBED_MEANS = ("measured under outside load, so their times are partly the load's: "
                   "the gate calls a slowdown among them inconclusive, not a regression, "
                   "and the history uses them with a wider spread")
# The lines render/progress.py ends the summary with, before which the disturbed cases go
# (beside the noisy ones).
AFTER_FLAGS = ("A/B:", "failed job:", "retried:", "reports:")


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def interrupted_line(event: dict) -> str:
    """'interrupted: 3 cases measured (1 of 2 measuring jobs finished); rerun to finish,
    finished cases are kept': the one line Ctrl-C gets."""
    i = event["interrupted"]
    rows = f" and {plural(i['ab_rows'], 'A/B row')}" if i["ab_rows"] else ""
    return (f"interrupted: {plural(i['cases'], 'case')}{rows} measured ({i['jobs_done']} "
            f"of {plural(i['jobs'], 'measuring job')} finished); rerun to finish, "
            "finished cases are kept")


def disturbed_lines(event: dict) -> list[str]:
    ids = event.get("disturbed") or []
    if not ids:
        return []
    return [f"disturbed ({len(ids)} of {event['timed']} timed cases): {DISTURBED_MEANS}",
            "  " + ", ".join(ids)]


def reports_line(event: dict) -> str | None:
    """Where the report files are not this run's: why none was made, and which files
    there are an earlier run's (stale), so that none is taken for this run's."""
    if event.get("reports_current", True):
        return None
    why = ("it was interrupted before its report step" if event.get("interrupted")
           else "it failed before its report step" if not event["success"]
           else "the report was not one of its targets")
    stale = event.get("stale_reports") or []
    if event.get("reports"):  # its other files (ab.json) are on the reports: line above
        return (f"stale, from an earlier run: {', '.join(stale)} (not made by this run: "
                f"{why})"
                if stale else None)
    return (f"reports: none made by this run ({why})"
            + (f"; stale, from an earlier run: {', '.join(stale)}" if stale else ""))


def summary_lines(event: dict) -> list[str]:
    """The summary block, render/progress.py's with the run's end added: an interrupted
    run's line first, its head counting the cases measured before the interrupt (not a
    FAILED run), the disturbed cases beside the noisy ones, the reports line."""
    lines = render.summary_lines(event)
    if event.get("interrupted"):
        head = next(i for i, line in enumerate(lines) if line.startswith("FAILED: "))
        lines[head] = "before the interrupt: " + lines[head].removeprefix("FAILED: ")
        lines.insert(head, interrupted_line(event))
    at = next((i for i, line in enumerate(lines) if line.startswith(AFTER_FLAGS)),
              len(lines))
    lines[at:at] = disturbed_lines(event)
    said = reports_line(event)
    return lines + ([said] if said else [])
