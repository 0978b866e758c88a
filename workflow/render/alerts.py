"""`benchflow history confirm`'s alert list (bisect/confirm.py's findings) as text lines
and as Markdown: confirmed, refuted or could not confirm, each with the history's change,
the paired A/B's ratio and interval, the commits, the first bad commit where bisected
and the dispatch or op that explains the change. Pure: the findings in, text out."""

from __future__ import annotations

from workflow.render.common import md_text
from workflow.render.text import printable

HEADS = {"confirmed": "CONFIRMED", "refuted": "REFUTED",
         "could-not-confirm": "COULD NOT CONFIRM"}


def _name(alert: dict) -> str:
    label = alert.get("config_label")
    return f"{alert['case_id']} {alert['metric']}" + (f" [{label}]" if label else "")


def history_change(alert: dict) -> str:
    """`+10.3 % [8.1, 12.0]` (a change point's bootstrap interval) or `+10.3 %`."""
    r = alert["history_ratio"]
    ci = alert.get("history_ci95")
    interval = f" [{100 * (ci[0] - 1):.1f}, {100 * (ci[1] - 1):.1f}]" if ci else ""
    return f"{100 * (r - 1):+.1f} %{interval}"


def paired(pair: dict | None) -> str:
    """`x1.102 [1.090, 1.115], 32 rounds`; `not measured` where no pair was."""
    if not pair or pair.get("ratio") is None:
        return "not measured"
    ci = pair.get("ci95")
    interval = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
    return f"x{pair['ratio']:.3f}{interval}, {pair.get('rounds') or 0} rounds"


def _runs(alert: dict) -> str:
    b, a = alert["before"], alert["after"]
    return (f"run {b['run_id']} ({b['head_sha'][:12] or 'no commit'}) -> run "
            f"{a['run_id']} ({a['head_sha'][:12] or 'no commit'})")


def _bisect_lines(found: dict) -> list[str]:
    b = found.get("bisect")
    if not b:
        return []
    if b.get("error"):
        return [f"  not bisected: {b['error']}"]
    if not b.get("first_bad"):
        return [f"  bisected: {b['summary']}"]
    out = [f"  first bad commit: {b['first_bad']} ({paired(b.get('final'))}; "
           f"{b['measured']} pair(s) in its search, the confirming one among them)"]
    if b.get("dispatch"):
        out.append(f"  its dispatch: {b['dispatch']}")
    if b.get("what_changed"):
        out.append(f"  {b['what_changed']}")
    return out


def text_lines(alerts: list[dict], level: list[str], head: str, summary: str) -> list[str]:
    """A block per alert (its line, then the commit, dispatch and why indented), the
    series a named run left without an alert, then the outcome's line."""
    lines = []
    for a in alerts:
        lines.append(f"{HEADS[a['status']]} {_name(a)}: history {history_change(a)} "
                     f"({a['source']}), {_runs(a)}; paired {paired(a.get('pair'))}")
        lines += _bisect_lines(a)
        if a.get("dispatch") and not (a.get("bisect") or {}).get("dispatch"):
            lines.append(f"  dispatch: {a['dispatch']}")
        lines.append(f"  {a['why']}")
    lines += level
    lines.append(f"{head}: {summary}")
    return [printable(line) for line in lines]


def markdown(alerts: list[dict], level: list[str], head: str, summary: str) -> str:
    """The alert list as a Markdown table (a pull-request or job summary), then each
    alert's why, dispatch and first bad commit."""
    out = ["## Alerts confirmed by paired A/B", "", f"**{head}**: {md_text(summary)}", ""]
    if alerts:
        out += ["| status | case | history | paired A/B | commits | first bad commit | "
                "dispatch |", "|---|---|---|---|---|---|---|"]
        for a in alerts:
            b = a.get("bisect") or {}
            commits = " → ".join(f"`{md_text(c[:12])}`" for c in (a.get("commits") or []))
            dispatch = b.get("dispatch") or a.get("dispatch") or ""
            first = f"`{md_text(b['first_bad'][:12])}`" if b.get("first_bad") else ""
            out.append(f"| {HEADS[a['status']]} | `{md_text(_name(a))}` | "
                       f"{history_change(a)} | {paired(a.get('pair'))} | {commits} | "
                       f"{first} | {md_text(dispatch)} |")
        out.append("")
        for a in alerts:
            out.append(f"- **`{md_text(a['case_id'])}`** ({md_text(_runs(a))}): "
                       f"{md_text(a['why'])}")
            out += [f"  - {md_text(line.strip())}" for line in _bisect_lines(a)]
        out.append("")
    out += [f"- {md_text(line)}" for line in level]
    return "\n".join(out).rstrip() + "\n"
