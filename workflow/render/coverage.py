"""Op coverage per model, after pytorch2.0_ttnn's coverage table: which aten ops each
model uses, whether each backend compiled and ran it, and how many models pass per
backend. Pure functions over a report dict (results/report.json, or a `benchflow run
-o` results file: both hold a `cases` list), so the Markdown report and the
`benchflow coverage` command show the same figures.

A model *passes* a backend when at least one of its cases there is `ok`, none
`failed`, and none measured inaccurate (accuracy.accurate false). Cases `unsupported`
or `skipped` count against nothing: a model whose cases on a backend are all such is
reported with that status and is not counted among that backend's models. Cases
`compile-only` (compiled here, not run: their device is absent) count as compiled, never
as failed nor as run: a model with compile-only cases on a backend and none ok, failed
or inaccurate is reported `compile-only`, and is not counted among that backend's models
either.
"""

from __future__ import annotations

from collections import Counter

from workflow.errors import REASON_CHARS, error_line
from workflow.render.text import text_columns
from workflow.stats.enums import Status

# A backend's status for a model: these two of its own, else a case status (failed,
# compile-only, unsupported, skipped).
PASS, INACCURATE = "pass", "inaccurate"
# Stages before which nothing is compiled: a case failed there never reached a backend.
BEFORE_COMPILED = {"export", "compile", "setup"}


def _compiled(case: dict) -> bool:
    """The case got through export and its backend's compile step (torch-eager has none)."""
    if case["status"] in (Status.OK, Status.COMPILE_ONLY):
        return True
    return case["status"] == Status.FAILED and case.get("stage") not in BEFORE_COMPILED


def _backend_status(cases: list[dict]) -> dict:
    statuses = Counter(c["status"] for c in cases)
    inaccurate = [c for c in cases if c["status"] == Status.OK
                  and (c.get("accuracy") or {}).get("accurate") is False]
    failed = [c for c in cases if c["status"] == Status.FAILED]
    if failed:
        status = Status.FAILED
    elif inaccurate:
        status = INACCURATE
    elif statuses[Status.OK]:
        status = PASS
    elif statuses[Status.COMPILE_ONLY]:
        status = Status.COMPILE_ONLY  # compiled, never run here: not a pass, not a failure
    else:  # every case unsupported or skipped
        status = Status.UNSUPPORTED if statuses[Status.UNSUPPORTED] else Status.SKIPPED
    first = (failed or inaccurate or [c for c in cases if c["status"] != Status.OK]
             or [None])[0]
    return {
        "status": status,
        "cases": len(cases),
        "ok": statuses[Status.OK],
        "failed": statuses[Status.FAILED],
        "unsupported": statuses[Status.UNSUPPORTED],
        "skipped": statuses[Status.SKIPPED],
        "compile_only": statuses[Status.COMPILE_ONLY],
        "compiled": sum(_compiled(c) for c in cases),
        "ran": sum(c.get("timing") is not None for c in cases),
        "inaccurate": len(inaccurate),
        "failed_stages": dict(Counter(c.get("stage") or "unknown" for c in failed)),
        # The first problem, for a table cell: which case, where and why.
        "first_problem": None if first is None else {
            "id": first["id"], "status": first["status"], "stage": first.get("stage"),
            "error": error_line(first.get("error"), limit=REASON_CHARS) or None},
    }


def model_coverage(report: dict) -> dict:
    """report -> {"backends": [...], "models": {model: {...}}, "passing": {backend: {...}}}.

    models[m]["ops"]: aten op -> count, over the model's workloads (the largest count any
    one workload has; workloads are counted once however many SKUs ran them);
    models[m]["backends"][b]: status (pass | failed | inaccurate | unsupported | skipped |
    compile-only)
    with case counts (compiled, ran, ...); passing[b]: {"models", "passing"}, where
    `models` counts the models with a case on b that is not unsupported or skipped.
    """
    cases = report["cases"]
    backends = sorted({c["backend"] for c in cases})
    models: dict[str, dict] = {}
    for model in sorted({c["model"] for c in cases}):
        mine = [c for c in cases if c["model"] == model]
        ops: dict[str, int] = {}
        workloads: dict[str, dict] = {}
        for c in mine:
            graph = c.get("graph")
            if graph and graph.get("op_histogram") is not None:
                workloads.setdefault(c["workload"], graph)
        for graph in workloads.values():
            for op, n in graph["op_histogram"].items():
                ops[op] = max(ops.get(op, 0), n)
        models[model] = {
            "ops": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
            "aten_ops": max((g["aten_ops"] for g in workloads.values()), default=None),
            "aten_ops_unique": len(ops) if workloads else None,
            "workloads": sorted({c["workload"] for c in mine}),
            "backends": {b: _backend_status([c for c in mine if c["backend"] == b])
                         for b in backends if any(c["backend"] == b for c in mine)},
        }
    passing = {}
    for b in backends:
        counted = [m for m in models.values()
                   if b in m["backends"] and m["backends"][b]["status"] in
                   (PASS, Status.FAILED, INACCURATE)]
        passing[b] = {"models": len(counted),
                      "passing": sum(m["backends"][b]["status"] == PASS for m in counted)}
    return {"backends": backends, "models": models, "passing": passing}


def format_coverage(cov: dict, ops: bool = False) -> str:
    """A plain-text table: one row per model, one column per backend, then pass counts."""
    backends = cov["backends"]
    rows = [["model", "aten ops", "unique", *backends]]
    for name, m in cov["models"].items():
        cells = []
        for b in backends:
            s = m["backends"].get(b)
            if s is None:
                cells.append("-")
                continue
            done = s["compile_only"] if s["status"] == Status.COMPILE_ONLY else s["ok"]
            cell = f"{s['status']} {done}/{s['cases']}"
            if s["status"] == Status.FAILED:
                cell += " (" + ", ".join(sorted(s["failed_stages"])) + ")"
            cells.append(cell)
        rows.append([name, str(m["aten_ops"] if m["aten_ops"] is not None else "-"),
                     str(m["aten_ops_unique"] if m["aten_ops_unique"] is not None else "-"),
                     *cells])
    lines = text_columns(rows)
    lines.append("")
    lines += [f"{b}: {p['passing']}/{p['models']} models pass"
              for b, p in cov["passing"].items()]
    if ops:
        for name, m in cov["models"].items():
            lines.append("")
            lines.append(f"{name}:")
            lines += [f"  {op} x{n}" for op, n in m["ops"].items()] or ["  (no graph recorded)"]
    return "\n".join(lines)

