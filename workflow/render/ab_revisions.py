"""A whole-suite A/B of two revisions (bisect/suite_ab.py) as the terminal shows it and as
a pull request comment (Markdown, GITHUB_STEP_SUMMARY): the changed cases first, each
with the dispatches behind its change, then what was not measured and why."""

from __future__ import annotations

from workflow.render.ab import decide_note, why_lines
from workflow.render.common import md_text
from workflow.render.text import printable
from workflow.stats.enums import ABVerdict
from workflow.stats.ratio_text import ratio_text

DECIDED = (ABVerdict.REGRESSION, ABVerdict.IMPROVEMENT)
# Rows a reviewer must see first: what got slower, then faster, then what broke.
ORDER = {ABVerdict.REGRESSION: 0, ABVerdict.IMPROVEMENT: 1, ABVerdict.FAILED: 2,
         ABVerdict.INCONCLUSIVE: 3, ABVerdict.NO_DIFFERENCE: 4}


def short(sha: str) -> str:
    return sha[:12]


def _figures(row: dict) -> str:
    """ratio [interval], rounds, seconds, why it stopped; or the failure."""
    if row["verdict"] == ABVerdict.FAILED:
        return f"{row.get('failed_stage')}: {row.get('error')}"
    ci = row.get("ci95") or row.get("ci")
    interval = f" [{ratio_text(ci[0])}, {ratio_text(ci[1])}]" if ci else ""
    note = decide_note(row) or equivalence_note(row)
    return (f"x{ratio_text(row['ratio'])}{interval}  {row['rounds']} rounds, "
            f"{row['seconds']:.1f} s ({row['stop_reason']})" + (f"; {note}" if note else ""))


def equivalence_note(row: dict) -> str:
    """Which margin decided a no-difference the ab.margin could not (the row's
    `equivalence`, bisect/suite_ab.judged_at_tolerance); nothing for other rows."""
    eq = row.get("equivalence")
    if not eq:
        return ""
    return (f"no-difference at the {eq['setting']} margin {eq['margin']:.0%} (interval "
            f"within [{1 / eq['tolerance']:.3f}, {eq['tolerance']:.3f}]); the ab.margin "
            f"{eq['ab_margin']:.0%} was not reached in {row['rounds']} rounds")


def merge_base_line(revs: dict) -> str | None:
    """What was compared when --base had moved on (ab.json's `revisions`)."""
    if not revs.get("merge_base"):
        return None
    return (f"against the merge base {short(revs['base'])} of --base {revs['base_ref']} "
            f"({short(revs['base_named'])}) and the new revision, as `git diff "
            f"{revs['base_ref']}...` compares: the base branch's later commits are not "
            "this change")


def rows_in_order(doc: dict) -> list[dict]:
    return sorted(doc["pairs"], key=lambda r: (ORDER.get(r["verdict"], 9), r["case"]))


def text_lines(doc: dict) -> list[str]:
    """A line per changed case with the dispatches behind a decided change under it,
    then the cases not measured, then the outcome line."""
    revs = doc["revisions"]
    lines = [f"{short(revs['new'])} against {short(revs['base'])} ({revs['suite']}):"]
    if merge_base_line(revs):
        lines.append(merge_base_line(revs))
    for row in rows_in_order(doc):
        lines.append(f"{row['verdict'].upper():<13} {row['case']}  {_figures(row)}")
        lines += [f"  {w}" for w in why_lines(row)]
    if doc["unchanged"]:
        lines.append(f"unchanged inputs: {len(doc['unchanged'])} case(s), not measured")
    if doc["same_module"]:
        lines.append("changed in source only, the same program at both revisions (IREE: "
                     "the exported module; torch: the exported graph), not measured: "
                     + ", ".join(doc["same_module"]))
    for case in doc["compile_only"]:
        lines.append(f"{'COMPILE-ONLY':<13} {case['case']}  not timed: {case['why']}")
    for kind in ("added", "removed", "unsupported"):
        if doc[kind]:
            lines.append(f"{kind}: " + ", ".join(doc[kind]))
    if doc.get("history"):
        lines.append(doc["history"]["line"])
    lines.append(doc['headline'])
    return [printable(line) for line in lines]


def _table(rows: list[dict]) -> list[str]:
    out = ["| verdict | case | ratio [interval], rounds |", "|---|---|---|"]
    for row in rows:
        verdict = f"**{row['verdict']}**" if row["verdict"] in DECIDED else row["verdict"]
        out.append(f"| {verdict} | {md_text(row['case'])} | {md_text(_figures(row))} |")
    return out


def markdown(doc: dict) -> str:
    """The summary for a pull request: the outcome, a table of regressions and
    improvements with their dispatches, then the rest collapsed."""
    revs = doc["revisions"]
    decided = [r for r in rows_in_order(doc) if r["verdict"] in DECIDED]
    rest = [r for r in rows_in_order(doc) if r["verdict"] not in DECIDED]
    lines = [f"### benchflow ab: {md_text(doc.get('suite_name') or revs['suite'])}, "
             f"`{short(revs['new'])}` against `{short(revs['base'])}`", "",
             f"**{md_text(doc['headline'])}**", ""]
    if merge_base_line(revs):
        lines += [md_text(merge_base_line(revs)), ""]
    if decided:
        lines += _table(decided)
        for row in decided:
            why = why_lines(row)
            if why:
                lines += ["", f"**{md_text(row['case'])}** ({row['verdict']}):",
                          *(f"- {md_text(w)}" for w in why)]
        lines.append("")
    others = (len(rest) + len(doc["unchanged"]) + len(doc["same_module"])
              + len(doc["compile_only"]))
    if others:
        lines += ["<details><summary>" + md_text(
            f"{len(rest)} other measured, "
            f"{len(doc['same_module']) + len(doc['unchanged']) + len(doc['compile_only'])} "
            "not measured case(s)")
            + "</summary>", ""]
        if rest:
            lines += [*_table(rest), ""]
        lines += [f"- same program at both revisions, not measured: {md_text(c)}"
                  for c in doc["same_module"]]
        lines += [f"- compiled only, not timed: {md_text(c['case'])}: {md_text(c['why'])}"
                  for c in doc["compile_only"]]
        lines += [f"- unchanged inputs, not measured: {md_text(c)}" for c in doc["unchanged"]]
        lines += ["", "</details>"]
    for kind in ("added", "removed", "unsupported"):
        if doc[kind]:
            lines += ["", f"{kind}: " + ", ".join(md_text(c) for c in doc[kind])]
    return "\n".join(lines) + "\n"
