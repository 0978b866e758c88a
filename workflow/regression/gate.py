"""The regression gate: golden verdicts into case records, and the check of a report.

The case step calls `golden_section` (its verdict travels in the case record, so the
report shows it); `check` reads those verdicts back, or judges a report afresh against
another goldens directory. `results/report.json` never fails because of a regression:
only `benchflow check` and the `results/gate.json` target do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from workflow.records.storage import read_json, write_json
from workflow.regression import goldens
from workflow.stats import verdict


def golden_section(case: dict, golden_file: str | Path | None, gate_config: dict | None,
                   file_goldens: dict | None = None, file_source: str | None = None) -> dict:
    """The `golden` section of a case record: every field of record.Golden, those the
    verdict leaves open at their defaults, so that it is complete wherever it is used."""
    from dataclasses import asdict

    from workflow.records.case import Golden

    if isinstance(golden_file, list | tuple):  # a Snakemake input that may be empty
        golden_file = golden_file[0] if golden_file else None
    ref = goldens.lookup(case["id"], golden_file, file_goldens, file_source)
    judged = verdict.judge(case, ref, verdict.Settings.from_config(gate_config))
    if case.get("status") == goldens.COMPILE_ONLY and ref is not None:
        judged = _compile_only(case, ref, judged)
    return asdict(Golden(**judged))


def _compile_only(case: dict, ref: verdict.GoldenRef, judged: dict) -> dict:
    """A compile-only case (its device is absent here) is judged on what it measured, its
    dispatch count and binary size; a golden time is not a regression: the time was not
    measured here, and the reason says so."""
    why = " ".join((case.get("error") or "no device here").split())
    if ref.median_ms is not None:
        reason = (f"compile-only: time not measured here ({why}); the golden time "
                  f"{ref.median_ms:g} ms is not judged, dispatch count and size are")
    else:
        reason = (f"compile-only: time not measured here ({why}); dispatch count and size "
                  "judged")
    return {**judged, "verdict": verdict.NO_GOLDEN, "ratio": None, "p_value": None,
            "test": None, "reason": reason}


def golden_input(directory: str, sku: str) -> list[str]:
    """The SKU's golden file as a rule input when it exists: blessing reruns the case
    steps (cheap) so that their verdicts follow the goldens."""
    path = goldens.golden_path(directory, sku)
    return [str(path)] if path.exists() else []


def file_goldens_of(case: dict) -> tuple[dict | None, str | None]:
    """The goldens a case's benchmark file holds for it (cases from benchmark files)."""
    prov = case.get("provenance") or {}
    path, key = prov.get("benchmark_file"), prov.get("golden_key")
    if not path or not Path(path).exists():
        return None, None
    from workflow.suite.sharktank import load_file

    return load_file(path).goldens(key), path


@dataclass(frozen=True)
class Finding:
    case_id: str
    aspects: list[str]   # time, dispatch, size
    detail: str

    def line(self) -> str:
        return f"{self.case_id}: {', '.join(self.aspects)} regressed ({self.detail})"


def _detail(g: dict) -> str:
    parts = []
    if g.get("verdict") == verdict.REGRESSION:
        if g.get("ratio") is not None:
            parts.append(f"time x{g['ratio']:.3f} vs tolerance x{g.get('tolerance'):g}, "
                         f"p={g.get('p_value'):.4f}")
        else:
            parts.append(g.get("reason") or "time")
    if g.get("dispatch_verdict") == verdict.REGRESSION:
        parts.append(f"dispatches x{g.get('dispatch_ratio') or 0:.3f} of "
                     f"{g.get('dispatch_golden')}")
    if g.get("size_verdict") == verdict.REGRESSION:
        parts.append(f"size x{g.get('size_ratio') or 0:.3f} of {g.get('size_golden_bytes')} B "
                     f"(tolerance x{g.get('size_tolerance'):g})")
    return "; ".join(parts)


def rejudge(report: dict, goldens_dir: str | Path, gate_config: dict | None) -> dict:
    """A copy of the report whose cases are judged against another goldens directory."""
    out = dict(report)
    cases = []
    for case in report["cases"]:
        fg, source = file_goldens_of(case)
        g = golden_section(case, goldens.golden_path(goldens_dir, case["sku"]), gate_config,
                           fg, source)
        cases.append({**case, "golden": {**case.get("golden", {}), **g}})
    out["cases"] = cases
    return out


def findings(report: dict) -> list[Finding]:
    """Every case that regressed in time, dispatch count or size."""
    out = []
    for case in report["cases"]:
        g = case.get("golden") or {}
        aspects = verdict.regressed_aspects(g)
        if aspects:
            out.append(Finding(case["id"], aspects, _detail(g)))
    return out


def summary(report: dict, found: list[Finding]) -> dict:
    counts: dict[str, int] = {}
    for case in report["cases"]:
        v = (case.get("golden") or {}).get("verdict", verdict.NO_GOLDEN)
        counts[v] = counts.get(v, 0) + 1
    compile_only = sum(c.get("status") == goldens.COMPILE_ONLY for c in report["cases"])
    return {"passed": not found, "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "cases": len(report["cases"]), "time_verdicts": counts,
            # Judged on dispatch count and binary size only (no device: no time).
            "compile_only": compile_only,
            "regressed": [{"id": f.case_id, "aspects": f.aspects, "detail": f.detail}
                          for f in found]}


class GateFailed(Exception):
    """Raised by the gate rule so that `snakemake results/gate.json` exits non-zero."""


def run_gate(report_path: str, out: str, log: str) -> dict:
    """The `gate` rule: writes the gate JSON when nothing regressed, else fails naming
    every regressed case (in the log and in the error)."""
    report = read_json(report_path)
    found = findings(report)
    result = summary(report, found)
    with open(log, "w") as fh:
        fh.write(json.dumps(result, indent=1) + "\n")
    if found:
        raise GateFailed("regressions against the goldens:\n" +
                         "\n".join(f"  {f.line()}" for f in found))
    write_json(out, result)
    return result
