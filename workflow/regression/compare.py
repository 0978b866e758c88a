"""`benchflow compare BASE NEW`: what got slower, faster or stayed, between two reports.

Each case present and measured in both is classified with the gate's rule (ratio of
medians beyond the tolerance and an exact one-sided Mann-Whitney test on invocation
medians below the p threshold): Regressed, Improved or Similar. Rows read
"new (vs. base, +x%)" with the p-value, sorted by change; a geometric mean of the
ratios summarizes the whole. It reports and never fails: gating is `benchflow check`.

Two reports are two runs (unless they name the same start): their medians were
measured minutes or days apart, and the drift and load between them are in every
ratio (identical code moved x1.58 to x2.69 between two runs on a shared machine and
read as "Regressed", p=0.0003). So every verdict says it is `cross-run`, in the header
and the JSON. Where both runs measured the case in an A/B pair against the same partner
(its speedup's `paired` basis: the baseline recipe or torch-eager, interleaved round by
round in each run), the row is decided by the pairs instead: the case's cost relative
to its partner in the new run over that in the base run, whose interval combines the
two pairs' (independent runs). Drift that moves the whole run moves both sides of each
pair; a change to the case alone moves the ratio. Such a row is `paired`.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, replace

from workflow.records import measurement_config
from workflow.regression import drift
from workflow.regression.explain import explain
from workflow.render.common import md_text
from workflow.stats.drift import common_drift
from workflow.stats.enums import Status, Verdict, status_at
from workflow.stats.verdict import GoldenRef, Settings, time_verdict
from workflow.suite.defaults import gate_settings

REGRESSED, IMPROVED, SIMILAR = "Regressed", "Improved", "Similar"


@dataclass(frozen=True)
class Row:
    id: str
    base_ms: float
    new_ms: float
    ratio: float
    p_value: float | None
    section: str
    note: str = ""  # dispatch or size changes, noisy data
    # Why (regression/explain.py): the structured attribution, its lines and the
    # provenance diff; for a Similar row only when its dispatch set changed.
    attribution: dict | None = None
    why: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    what_changed: str = ""  # the line said under the row (regression/explain.py)
    # "cross-run" (medians of two runs) or "paired" (decided by both runs' A/B pairs,
    # `pair` then says which and its interval).
    basis: str = "cross-run"
    pair: dict | None = None

    @property
    def change(self) -> float:
        return self.ratio - 1


def _measured(case: dict) -> bool:
    return case.get("status") == Status.OK and bool(case.get("timing"))


def _note(base: dict, new: dict) -> str:
    notes = []
    b, n = base.get("compile") or {}, new.get("compile") or {}
    if b.get("dispatch_count") is not None and n.get("dispatch_count") != b.get("dispatch_count"):
        notes.append(f"dispatches {b['dispatch_count']} -> {n.get('dispatch_count')}")
    if b.get("binary_bytes") and n.get("binary_bytes") and n["binary_bytes"] != b["binary_bytes"]:
        notes.append(f"size {n['binary_bytes'] / b['binary_bytes'] - 1:+.1%}")
    if new["timing"].get("noisy"):
        notes.append("noisy")
    for side, case in (("base", base), ("new", new)):
        if (case.get("timing") or {}).get("disturbed"):
            notes.append(f"{side} disturbed by outside load")
    return ", ".join(notes)


def compare(base: dict, new: dict, settings: Settings | None = None,
            accept_config=()) -> dict:
    """Rows per section plus what could not be compared and the geometric mean. A case
    measured at another measurement configuration on the two sides (records/
    measurement_config.py) is not compared, save for the `accept_config` keys."""
    settings = settings or gate_settings()
    base_cases = {c["id"]: c for c in base["cases"]}
    new_cases = {c["id"]: c for c in new["cases"]}
    rows: list[Row] = []
    unmatched: list[tuple[str, str]] = []
    for cid in sorted(set(base_cases) | set(new_cases)):
        b, n = base_cases.get(cid), new_cases.get(cid)
        if b is None or n is None:
            unmatched.append((cid, "only in new" if b is None else "only in base"))
            continue
        if not (_measured(b) and _measured(n)):
            which = [name for name, c in (("base", b), ("new", n)) if not _measured(c)]
            status = "; ".join(f"{name}: {status_at(c)}"
                               for name, c in (("base", b), ("new", n)) if name in which)
            unmatched.append((cid, status))
            continue
        diffs = measurement_config.differences(measurement_config.of_case(n),
                                               measurement_config.of_case(b), accept_config)
        if diffs:
            unmatched.append((cid, "measurement configuration differs: "
                                   f"{measurement_config.describe_all(diffs, 'base')} "
                                   "(--accept-config "
                                   f"{','.join(d['key'] for d in diffs)} compares them)"))
            continue
        golden = GoldenRef(source="base", median_ms=b["timing"]["median_ms"],
                           invocation_medians_ms=tuple(b["timing"]["invocation_medians_ms"]))
        tv = time_verdict(n["timing"]["invocation_medians_ms"], bool(n["timing"].get("noisy")),
                          golden, settings.tolerance, settings.p_value)
        if tv.ratio is None:  # a base median of zero: no ratio to speak of
            unmatched.append((cid, "base median is 0"))
            continue
        pair = paired_change(b, n, settings.tolerance)
        verdict = pair["verdict"] if pair else tv.verdict
        section = {Verdict.REGRESSION: REGRESSED,
                   Verdict.IMPROVEMENT: IMPROVED}.get(verdict, SIMILAR)
        note = _note(b, n)
        if verdict == Verdict.INCONCLUSIVE:
            note = ", ".join(x for x in (note, Verdict.INCONCLUSIVE) if x)
        rows.append(_explained(Row(
            cid, b["timing"]["median_ms"], n["timing"]["median_ms"],
            pair["ratio"] if pair else tv.ratio, None if pair else tv.p_value, section,
            note, basis=PAIRED if pair else CROSS_RUN, pair=pair), b, n, base, new))
    sections = {
        REGRESSED: sorted((r for r in rows if r.section == REGRESSED), key=lambda r: -r.ratio),
        IMPROVED: sorted((r for r in rows if r.section == IMPROVED), key=lambda r: r.ratio),
        SIMILAR: sorted((r for r in rows if r.section == SIMILAR), key=lambda r: -r.ratio),
    }
    ratios = [r.ratio for r in rows]
    geomean = math.exp(statistics.fmean(math.log(x) for x in ratios)) if ratios else None
    return {"settings": asdict(settings), "sections": sections, "unmatched": unmatched,
            "geomean_ratio": geomean, "compared": len(rows), "levels": _levels(rows, new_cases),
            "base": _about(base), "new": _about(new),
            "basis": SAME_RUN if same_run(base, new) else CROSS_RUN,
            "paired_rows": sum(r.basis == PAIRED for r in rows)}


CROSS_RUN, PAIRED, SAME_RUN = "cross-run", "paired", "same-run"


def same_run(base: dict, new: dict) -> bool:
    """Whether two reports are of one run: both name when it started, and it is the
    same moment (a report compared with a copy of itself). Otherwise, including a
    report that does not say, they are two runs: the safe reading."""
    a = (base.get("provenance") or {}).get("started_at")
    b = (new.get("provenance") or {}).get("started_at")
    return bool(a) and a == b and base.get("generated_at") == new.get("generated_at")


def paired_change(b: dict, n: dict, tolerance: float) -> dict | None:
    """The case's change between two runs from the A/B pairs both measured it in
    against the same partner (module doc), or None where they did not: {against
    (vs_baseline | vs_eager), ab_row, ratio (new / base, above 1 slower), ci95, verdict,
    base_pair, new_pair (each run's own speedup and interval)}. Each pair's speedup is
    partner / case; the change is the base run's speedup over the new run's. Its 95 %
    interval adds the two pairs' half-widths on the log scale in quadrature (the runs
    are independent). The verdict: beyond the tolerance with the interval excluding 1
    is a regression (improvement); past the tolerance with 1 inside the interval,
    inconclusive; else no difference (Similar)."""
    for which in ("vs_baseline", "vs_eager"):
        pb = (((b.get("speedup") or {}).get("basis") or {}).get(which) or {})
        pn = (((n.get("speedup") or {}).get("basis") or {}).get(which) or {})
        if not (pb.get("kind") == pn.get("kind") == PAIRED and pb.get("ab_row")
                and pb.get("ab_row") == pn.get("ab_row") and pb.get("ci95")
                and pn.get("ci95") and pb.get("ratio") and pn.get("ratio")
                and min(pb["ci95"] + pn["ci95"]) > 0):
            continue
        centre = math.log(pb["ratio"] / pn["ratio"])
        half = math.hypot(*(math.log(p["ci95"][1] / p["ci95"][0]) / 2 for p in (pb, pn)))
        lo, hi = math.exp(centre - half), math.exp(centre + half)
        ratio = math.exp(centre)
        slower = ratio >= 1
        beyond = ratio > tolerance if slower else ratio < 1 / tolerance
        excludes = lo > 1 if slower else hi < 1
        verdict = ((Verdict.REGRESSION if slower else Verdict.IMPROVEMENT)
                   if beyond and excludes else Verdict.INCONCLUSIVE if beyond
                   else Verdict.PASS)
        return {"against": which, "ab_row": pb["ab_row"], "ratio": ratio,
                "ci95": [lo, hi], "verdict": verdict,
                "base_pair": {"speedup": pb["ratio"], "ci95": pb["ci95"]},
                "new_pair": {"speedup": pn["ratio"], "ci95": pn["ci95"]}}
    return None


def _levels(rows: list[Row], cases: dict[str, dict]) -> list[dict]:
    """How each group of cases that drift alike (regression/drift.py) moved, together:
    between two runs a whole group moving is machine drift or a change to every case,
    which rows alone do not say. Rows are classified as measured; `check` judges
    against a run's level."""
    by_group: dict[str, list[float]] = {}
    for r in rows:
        by_group.setdefault(drift.group_of(cases[r.id]), []).append(r.ratio)
    return [d.to_dict() for g, ratios in sorted(by_group.items())
            if (d := common_drift(g, ratios)) is not None]


def _explained(row: Row, b: dict, n: dict, base: dict, new: dict) -> Row:
    """The row with its explanation: the dispatches or ops behind a regression or an
    improvement (the medians as totals; the verdict's test already put the change beyond
    noise, so noise_ms is 0) and what differs in provenance. A Similar row keeps one only
    when its dispatch set changed (a fusion change is worth naming even when the timer
    cannot see it), the times then undivided."""
    e = explain(b, n, row.base_ms, row.new_ms, decided=row.section != SIMILAR,
                base_report=base.get("provenance"), new_report=new.get("provenance"))
    if row.section == SIMILAR and not e["structural"]:
        return row
    return replace(row, attribution=e["attribution"], why=tuple(e["lines"]),
                   changed=tuple(e["changed"]), what_changed=e["what_changed"])


def _about(report: dict) -> dict:
    prov = report.get("provenance", {})
    return {"generated_at": report.get("generated_at"), "git_sha": prov.get("git_sha"),
            "suite_name": prov.get("suite_name")}


def _ms(x: float) -> str:
    return f"{x:.4g} ms"


def _cell(r: Row) -> str:
    if r.pair:  # the change is the pairs'; the medians of two runs beside it
        return (f"{_ms(r.new_ms)} (vs. {_ms(r.base_ms)}); {r.change:+.1%} relative to "
                f"{r.pair['ab_row'].split(' -> ')[0]}")
    return f"{_ms(r.new_ms)} (vs. {_ms(r.base_ms)}, {r.change:+.1%})"


def _p(r: Row) -> str:
    if r.pair:
        lo, hi = r.pair["ci95"]
        return f"paired [{lo:.3f}, {hi:.3f}]"
    return "n/a" if r.p_value is None else f"{r.p_value:.3g}"


def _basis_line(result: dict) -> str:
    """What the verdicts are: two runs' medians (cross-run), and which rows the pairs
    decided."""
    if result.get("basis") == SAME_RUN:
        return "Both reports are of one run."
    paired = result.get("paired_rows", 0)
    return ("**Cross-run**: base and new are two runs, measured apart; the drift and "
            "load between them are in every ratio, so a verdict here is cross-run, not "
            "paired (`benchflow ab` measures two revisions interleaved). "
            + (f"{paired} row(s) marked *paired* are decided by the A/B pairs both runs "
               "measured against the same partner (the case's cost relative to it), "
               "which drift between the runs does not move."
               if paired else "No case has an A/B pair in both runs to decide it."))


def to_markdown(result: dict) -> str:
    s = result["settings"]
    base, new = result["base"], result["new"]
    out = ["## Benchmark comparison", "",
           # The reports' own fields are text, never markup (md_text).
           f"base `{md_text(base['git_sha'] or '?')}` ({md_text(base['generated_at'])}) → new "
           f"`{md_text(new['git_sha'] or '?')}` ({md_text(new['generated_at'])}): "
           f"{result['compared']} cases. "
           f"A change counts beyond ×{s['tolerance']:g} (or below ×{1 / s['tolerance']:.3g}) "
           f"with p < {s['p_value']:g} (exact one-sided Mann-Whitney on invocation medians).",
           "", _basis_line(result), ""]
    for name, rows in result["sections"].items():
        out.append(f"### {name} ({len(rows)})")
        out.append("")
        if not rows:
            out += ["none", ""]
            continue
        table = ["| case | new (vs. base, change) | p | note |", "|---|---|---|---|"]
        # The header says every other row is cross-run; a paired one says so itself.
        table += [f"| `{r.id}` | {_cell(r)} | {_p(r)} | "
                  f"{md_text(', '.join(x for x in (r.pair and PAIRED, r.note) if x))} |"
                  for r in rows]
        if name == SIMILAR and len(rows) > 10:
            # Long unchanged lists would drown a pull-request comment: fold them.
            out += ["<details><summary>show</summary>", "", *table, "", "</details>", ""]
        else:
            out += [*table, ""]
        out += _why_markdown(rows)
    g = result["geomean_ratio"]
    out += ["### Summary", "", "| | ratio new / base |", "|---|---|",
            f"| **geometric mean ({result['compared']} cases)** | "
            + (f"×{g:.4f} ({g - 1:+.1%})" if g is not None else "n/a") + " |",
            *(f"| level of the {d['cases']} {md_text(d['group'])} cases (their median) | "
              f"×{d['factor']:.4f} ({d['factor'] - 1:+.1%}) |" for d in result.get("levels", ())),
            ""]
    if any(abs(math.log(d["factor"])) > math.log(s["tolerance"])
           for d in result.get("levels", ())):
        out += ["A group moved past the tolerance as a whole: between two runs that is the "
                "machine's drift or a change to every case of it; `benchflow check` against "
                "goldens from several runs tells them apart.", ""]
    if result["unmatched"]:
        out += [f"### Not compared ({len(result['unmatched'])})", ""]
        out += [f"- `{cid}`: {md_text(why)}" for cid, why in result["unmatched"]]
        out.append("")
    return "\n".join(out)


def _why_markdown(rows: list[Row]) -> list[str]:
    """Under a section's table, per explained row: the dispatches or ops behind it and
    what changed between the two sides (a diff), as text."""
    out = []
    for r in (r for r in rows if r.why or r.changed):
        out.append(f"**`{md_text(r.id)}`** {r.change:+.1%}:")
        out += [f"- {md_text(line)}" for line in r.why]
        out.append(f"- {md_text(r.what_changed)}")
        out.append("")
    return out


def to_json(result: dict) -> dict:
    return {**result,
            "sections": {name: [{**asdict(r), "why": list(r.why), "changed": list(r.changed),
                                 "change": r.change} for r in rows]
                         for name, rows in result["sections"].items()},
            "unmatched": [{"id": cid, "why": why} for cid, why in result["unmatched"]]}
