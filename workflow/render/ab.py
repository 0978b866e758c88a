"""The A/B section of report.md and report.html, from results/ab.json: per pair and
workload the verdict, the ratio with its interval and level, the p-value, the rounds and
seconds it took, why it stopped, and the smallest slowdown it could have detected."""

from __future__ import annotations

from workflow.paths import AB
from workflow.records.ab import check_ab
from workflow.render import templating
from workflow.render.common import md_text
from workflow.stats.enums import ABVerdict
from workflow.stats.ratio_text import ratio_text

COLUMNS = ("verdict", "base → new", "workload", "ratio", "interval", "p", "rounds",
           "seconds", "stopped", "detectable")
EXPLANATION = (
    "Each row alternates fresh invocations of the base and the new SKU's module in one "
    "job, in a random order per round, so that drift hits both; ratio = exp(median of "
    "the per-round log(new / base)), above 1 is slower. The interval holds at the level "
    "shown over all looks of the sequential plan, so stopping early does not inflate "
    "false alarms; p is the exact sign test at the last look. *detectable* is the "
    "smallest slowdown these rounds would have flagged as a regression with 80 % power: "
    "a no-difference or inconclusive row says nothing about smaller changes; an "
    "inconclusive row's *stopped* says what would decide it at the noise it saw. A torch row "
    "(sides sku+backend+recipe) alternates timed blocks of two long-lived workers, one "
    "per side, each compiled once, with fresh workers every few rounds (shown).")


def workload_cell(row: dict) -> str:
    """The workload, or `base → new` for a torch pair of two workloads."""
    w = row.get("workloads")
    return f"{w['base']} → {w['new']}" if w else row["workload"]


def protocol_note(row: dict) -> str:
    """How a torch row was timed (blocks, fresh workers); nothing for IREE rows."""
    if row.get("kind") != "torch":
        return ""
    return f"{row['block_s']:g} s blocks, fresh workers every {row['worker_rounds']} rounds"


def decide_note(row: dict) -> str:
    """For an inconclusive row, what would decide it at the noise it saw (the row's
    `to_decide`, stats/sequential.to_decide); nothing for other rows."""
    t = row.get("to_decide")
    if row["verdict"] != ABVerdict.INCONCLUSIVE or not t:
        return ""
    noise = f"log-ratio spread {t['sigma']:.2%} per round"
    if not t["decidable"]:
        need = (f"{t['rounds']} rounds, about {t['seconds']:.0f} s" if t["rounds"]
                else "more than 100,000 rounds")
        return (f"at this noise ({noise}) deciding needs {need}, beyond {t['limit_s']:g} s: "
                "the machine is too noisy for this margin (or the ratio sits at it); pick a "
                "single-threaded local-sync SKU, quiet the machine, or raise ab.margin")
    settings = [f"ab.{k}: {t[k]:g}" for k in ("max_rounds", "budget_s") if t[k] is not None]
    need = (f"{t['rounds']} rounds (about {t['seconds']:.0f} s) decide "
            f"{t['power']:.0%} of runs at this noise ({noise})")
    return (f"{need}: set {', '.join(settings)}" if settings
            else f"{need}, within the current settings: run it again")


def _cells(row: dict) -> list[str]:
    pair = f"{row['base']} → {row['new']}"
    if row["verdict"] == ABVerdict.FAILED:
        return ["**failed**", pair, workload_cell(row), "—",
                f"{row.get('failed_stage')}: {row.get('error')}", "—", "—", "—", "—", "—"]
    ci = row.get("ci95") or row.get("ci")
    interval = (f"[{ci[0]:.3f}, {ci[1]:.3f}] at {row['level']:.1%}" if ci and row.get("level")
                else "none (too few rounds)")
    verdict = row["verdict"]
    if verdict in (ABVerdict.REGRESSION, ABVerdict.IMPROVEMENT):
        verdict = f"**{verdict}**"
    note = protocol_note(row)
    rounds = f"{row['rounds']} ({note})" if note else str(row["rounds"])
    return [verdict, pair, workload_cell(row), f"×{ratio_text(row['ratio'])}", interval,
            f"{row['p_value']:.3g}", rounds, f"{row['seconds']:.1f}",
            "; ".join(filter(None, (row["stop_reason"], decide_note(row)))),
            f"×{ratio_text(row['mde'])}" if row.get("mde") else "—"]


def why_lines(row: dict) -> list[str]:
    """Under a row: the dispatches behind its change (said for a regression or an
    improvement, or when the dispatch set changed) and what differs between the two
    SKUs; nothing for a row without profiles (comparisons/ab.row_attribution)."""
    e = row.get("attribution")
    decided = row["verdict"] in (ABVerdict.REGRESSION, ABVerdict.IMPROVEMENT)
    if not e or not (decided or e["structural"]):
        return []
    return [*e["lines"], e["what_changed"]]


def markdown(doc: dict, source: str = AB) -> str:
    """The section as Markdown; `doc` is checked first (records/ab.check_ab): a cut or
    retyped ab.json is one line naming `source` and the key, never a crash halfway."""
    check_ab(doc, source, rows_only=True)
    rows = [_cells(r) for r in doc["pairs"]]
    lines = ["", "## A/B comparisons (interleaved)", "", EXPLANATION, "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    # Every cell as text (a failed row's error may carry markup): HTML and pipes escaped.
    lines += ["| " + " | ".join(md_text(c) for c in r) + " |" for r in rows]
    for r in doc["pairs"]:
        why = why_lines(r)
        if why:
            lines += ["", f"**{md_text(r['base'])} → {md_text(r['new'])}, "
                          f"{md_text(workload_cell(r))}** ({r['verdict']}):",
                      *(f"- {md_text(w)}" for w in why)]
    return "\n".join(lines) + "\n"


def html(doc: dict, source: str = AB) -> str:
    """The section as HTML (templates/ab.html.j2), the Markdown emphasis dropped; `doc`
    checked first, as for markdown."""
    check_ab(doc, source, rows_only=True)
    return templating.render(
        "ab.html.j2", explanation=EXPLANATION.replace("*", ""), columns=COLUMNS,
        rows=[[c.replace("**", "") for c in _cells(r)] for r in doc["pairs"]])
