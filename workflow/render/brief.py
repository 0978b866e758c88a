"""Short forms for a reader who scans (issue 45): a long cell cut at a clause (the whole
text stays on hover), the unsupported cases grouped by reason and then by what their ids
share, and the words a report uses for why measuring stopped. Shared by report.md and
report.html, so both say the same thing the same way."""

from __future__ import annotations

from workflow.measure.plans import OUT_OF_REACH as OUT_OF_REACH_FACTOR
from workflow.stats.sequential import OUT_OF_REACH

# A free-text table cell (a reason, a verdict) longer than this is cut: one CUDA driver
# message was wider than the rest of the table together.
CELL_CHARS = 36
# Clause ends a cut prefers, so that the short form reads as a phrase.
_CLAUSES = (": ", "; ", " (", ", ")

# What report.md's and report.html's legends say of a timing that stopped early. The
# terminal's progress lines print the same term after the invocation count.
OUT_OF_REACH_TEXT = (
    f"{OUT_OF_REACH}: measuring stopped at a look because the 95% interval, projected to "
    f"max_invocations, would still have been more than {OUT_OF_REACH_FACTOR:g}× as wide as "
    "its target (a noisy or loaded machine); the interval is wider than aimed for, and "
    "still holds at 95%.")


def short(text: str, limit: int = CELL_CHARS) -> str:
    """`text` on one line, cut to at most `limit` characters with '…': at the last clause
    end within the limit when that keeps half of it, else at the last space."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    cut = max(head.rfind(mark) for mark in _CLAUSES)
    if cut < limit // 2:
        cut = head.rfind(" ") if head.rfind(" ") >= limit // 2 else len(head)
    return head[:cut].rstrip(" :;,(") + "…"


def stop_note(case: dict) -> str:
    """' width-out-of-reach' for a timing that stopped short of its target width, which
    the legend explains; '' otherwise (a fixed count, the target reached)."""
    timing = case.get("timing") or {}
    return f" {OUT_OF_REACH}" if timing.get("stop_reason") == OUT_OF_REACH else ""


def pattern(case: dict) -> str:
    """A case's id with its workload left out: what the cases of one group share."""
    return f"{case['sku']}/{case['backend']}/…/{case['recipe']}"


def grouped(cases: list[dict], why) -> list[tuple[str, int, list[tuple[str, list[str]]]]]:
    """(reason, how many, groups) of `cases` by their one-line reason `why(case)`, in the
    order each reason first occurs; each reason's cases grouped by SKU, backend and recipe,
    with their workloads (a group of one: its whole id, no workloads). 210 ids of one
    torchao recipe that the IREE backend cannot run read as a few lines, not a paragraph."""
    reasons: dict[str, dict[str, list[dict]]] = {}
    for case in cases:
        reasons.setdefault(why(case), {}).setdefault(pattern(case), []).append(case)
    out = []
    for reason, groups in reasons.items():
        rows = [(members[0]["id"], []) if len(members) == 1
                else (key, [x["workload"] for x in members]) for key, members in groups.items()]
        out.append((reason, sum(len(m) for m in groups.values()), rows))
    return out
