"""The A/B section of report.md and report.html, from results/ab.json: per pair and
workload the verdict, the ratio with its interval and level, the p-value, the rounds and
seconds it took, why it stopped, and the smallest slowdown it could have detected."""

from __future__ import annotations

from workflow.render import templating
from workflow.stats.enums import ABVerdict

COLUMNS = ("verdict", "base → new", "workload", "ratio", "interval", "p", "rounds",
           "seconds", "stopped", "detectable")
EXPLANATION = (
    "Each row alternates fresh invocations of the base and the new SKU's module in one "
    "job, in a random order per round, so that drift hits both; ratio = exp(median of "
    "the per-round log(new / base)), above 1 is slower. The interval holds at the level "
    "shown over all looks of the sequential plan, so stopping early does not inflate "
    "false alarms; p is the exact sign test at the last look. *detectable* is the "
    "smallest slowdown these rounds would have flagged as a regression with 80 % power: "
    "a no-difference or inconclusive row says nothing about smaller changes.")


def _cells(row: dict) -> list[str]:
    pair = f"{row['base']} → {row['new']}"
    if row["verdict"] == ABVerdict.FAILED:
        return ["**failed**", pair, row["workload"], "—",
                f"{row.get('failed_stage')}: {row.get('error')}", "—", "—", "—", "—", "—"]
    ci = row.get("ci95") or row.get("ci")
    interval = (f"[{ci[0]:.3f}, {ci[1]:.3f}] at {row['level']:.1%}" if ci and row.get("level")
                else "none (too few rounds)")
    verdict = row["verdict"]
    if verdict in (ABVerdict.REGRESSION, ABVerdict.IMPROVEMENT):
        verdict = f"**{verdict}**"
    return [verdict, pair, row["workload"], f"×{row['ratio']:.3f}", interval,
            f"{row['p_value']:.3g}", str(row["rounds"]), f"{row['seconds']:.1f}",
            row["stop_reason"], f"×{row['mde']:.3f}" if row.get("mde") else "—"]


def markdown(doc: dict) -> str:
    rows = [_cells(r) for r in doc["pairs"]]
    lines = ["", "## A/B comparisons (interleaved)", "", EXPLANATION, "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def html(doc: dict) -> str:
    """The section as HTML (templates/ab.html.j2), the Markdown emphasis dropped."""
    return templating.render(
        "ab.html.j2", explanation=EXPLANATION.replace("*", ""), columns=COLUMNS,
        rows=[[c.replace("**", "") for c in _cells(r)] for r in doc["pairs"]])
