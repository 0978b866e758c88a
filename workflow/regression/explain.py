"""Why a case changed between two sides (issue 25, "Attributed" and "What changed"): the
dispatches or ops that explain the change (stats/attribution.py on the two sides'
`kernels.rows`) and what differs in their provenance (records/provenance_diff.py). The
one place `compare`, `check` and `ab` build their explanation, so that the three say it
alike.

An explanation is a dict, JSON as it is: `attribution` (stats.attribution.Attribution
as a dict, null when neither side has a profile), `lines` (its summary lines, or why
there are none), `changed` (the provenance diff, one line per difference), `what_changed` (the line
the commands print: the diff, or what an empty one means) and
`structural` (the dispatch set changed: dispatches added or removed, worth saying even
when the time change is within noise, e.g. a fusion flag whose effect the timer cannot
see).
"""

from __future__ import annotations

import math
from dataclasses import asdict

from workflow.records.kernels import others_count
from workflow.records.provenance_diff import NOTHING, provenance_diff
from workflow.stats import attribution

# The profile's "(N others)" row (records of issue 25): named by its count, which may
# differ by side; one shared name lets the two sides' rest match as one row.
OTHERS = "(other rows)"


def profile_rows(kernels: dict | None) -> tuple[list[dict], str | None]:
    """A side's timed rows and, when it has none, why (None: it has rows). A compile-only
    dispatch list has no times: nothing to divide a time change among."""
    if not kernels:
        return [], "not profiled"
    if kernels.get("error"):
        return [], f"profiling failed: {kernels['error']}"
    rows = [r for r in kernels.get("rows") or [] if isinstance(r.get("total_ms"), int | float)]
    if not rows:
        return [], f"no timed rows ({kernels.get('source')})"
    return [{**r, "name": OTHERS} if others_count(r["name"]) is not None else r
            for r in rows], None


def interval_noise_ms(base_total_ms: float, ratio: float, ci: list | None) -> float:
    """The time change a ratio's interval leaves open: base x the distance from the ratio
    to the interval's end on the side of 1 (its half-width toward no change). A change
    the interval excludes 1 for is larger than it, so a decided verdict is never
    called within noise; no interval: 0 (the verdict's own test said it was beyond)."""
    if not ci:
        return 0.0
    lo, hi = ci
    return base_total_ms * (ratio - lo if ratio >= 1 else hi - ratio)


def explain(base: dict, new: dict, base_total_ms: float, new_total_ms: float, *,
            decided: bool, noise_ms: float = 0.0, base_report: dict | None = None,
            new_report: dict | None = None, top: int = 3) -> dict:
    """The explanation (module docstring) of a change from `base` to `new` (case records,
    or anything with their `kernels`, `compile` and `provenance`), each side's total its
    measured median per call. `decided`: the comparison found a regression or an
    improvement; otherwise the change is within noise and only the structure (dispatches
    added or removed) and the largest row are said."""
    b_rows, b_why = profile_rows(base.get("kernels"))
    n_rows, n_why = profile_rows(new.get("kernels"))
    changed = provenance_diff(base, new, base_report=base_report, new_report=new_report)
    a = attribution.attribute(b_rows, n_rows, base_total_ms, new_total_ms, top=5,
                              noise_ms=noise_ms if decided else math.inf)
    lines = attribution.summary_lines(a, top=top)
    if a.missing:
        why = "; ".join(f"{side}: {w}" for side, w in (("base", b_why), ("new", n_why)) if w)
        lines = [f"{lines[0]} ({why})"]
    said = "; ".join(changed) or _unchanged(base, new)
    return {"attribution": None if a.missing == "both" else _plain(asdict(a)), "lines": lines,
            "changed": changed, "what_changed": f"what changed: {said}",
            "structural": bool(a.added or a.removed)}


def _unchanged(base: dict, new: dict) -> str:
    """What an empty diff means: NOTHING differs, or, where the records hold no model
    source digests, nothing that they record (a model's edited source would not show)."""
    if all((c.get("provenance") or {}).get("model_sources") for c in (base, new)):
        return NOTHING
    return "same flags, tools and host (model sources not recorded)"



def _plain(value):
    """A dataclass's asdict as JSON reads back (tuples as lists), so that the result is
    the same in memory and in a written file."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def text_lines(explanation: dict, indent: str = "  ") -> list[str]:
    """The explanation as the commands print it under a verdict line: the attribution's
    lines, then `what changed` as a diff. Dispatch names and provenance values are
    outside text, shown with control characters escaped (render.text.printable): a
    terminal must not obey an escape sequence a kernel name carries."""
    from workflow.render.text import printable

    out = [f"{indent}{printable(line)}" for line in explanation["lines"]]
    out.append(f"{indent}{printable(explanation['what_changed'])}")
    return out


def golden_record(entry: dict) -> tuple[dict, dict]:
    """A golden entry (regression/goldens.py) as the base side's case record and report
    provenance. An entry blessed with `explain` (goldens 1.1) holds the blessed case's
    kernels, compile flags and provenance; an older one only its versions and commit."""
    kept = entry.get("explain") or {}
    report = {"versions": entry.get("versions") or {}, "git_sha": entry.get("git_sha"),
              **({"host": kept["host"]} if kept.get("host") else {})}
    return ({"kernels": kept.get("kernels"), "compile": kept.get("compile"),
             "provenance": kept.get("provenance")}, report)


def against_golden(case: dict, entry: dict, report: dict, *, decided: bool = True
                   ) -> dict | None:
    """The explanation of a case judged against its golden entry: None when either side
    has no time (a compile-only golden or case). Fields the golden does not hold (an entry
    blessed before goldens 1.1) are taken as the case's, so the diff names only what both
    sides say."""
    new_ms = (case.get("timing") or {}).get("median_ms")
    if entry.get("median_ms") is None or new_ms is None:
        return None
    base, base_report = golden_record(entry)
    new_report = report.get("provenance") or {}
    base = {k: v if v is not None or k == "kernels" else case.get(k) for k, v in base.items()}
    # One SKU's goldens, keyed by case id: the case's own sku, device, backend and recipe.
    base.update({k: case.get(k) for k in ("sku", "device", "backend", "recipe")})
    base_report.setdefault("host", new_report.get("host"))
    e = explain(base, case, entry["median_ms"], new_ms, decided=decided,
                base_report=base_report, new_report=new_report)
    if not entry.get("explain"):
        e["lines"] = [f"{e['lines'][0]}: golden blessed without kernels (before goldens "
                      "1.1); bless again to name dispatches"] + e["lines"][1:]
    return e


def finding_lines(report: dict, findings: list, goldens_dir=None,
                  base=None) -> dict[str, list[str]]:
    """{case id: the explanation's lines} of the cases `check` found regressed
    (regression/gate.Finding) in time or dispatch count against a golden file
    (regression/gate.golden_file_for): under each REGRESSED line the dispatches behind it
    (the time divided among them only when the time regressed) and what changed since
    the blessed run. A case judged against a benchmark file's goldens (a time, no
    profile) or regressed in size only has none."""
    from workflow.regression import gate, goldens

    cases = {c["id"]: c for c in report["cases"]}
    out = {}
    for f in (f for f in findings if {"time", "dispatch"} & set(f.aspects)):
        cid, case = f.case_id, cases[f.case_id]
        path = gate.golden_file_for(case, goldens_dir, base)
        entry = goldens.read(path)["cases"].get(cid) if path and path.is_file() else None
        e = (against_golden(case, entry, report, decided="time" in f.aspects)
             if entry else None)
        if e is not None:
            out[cid] = text_lines(e, indent="    ")
    return out
