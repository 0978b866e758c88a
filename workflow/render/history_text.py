"""`benchflow history show` as text (pure): the runs in the store, or a series with each
run's commit, branch, value, invocation range, host and versions."""

from __future__ import annotations

from workflow.render.common import fmt
from workflow.render.text import text_columns

# Versions shown per run, in this order: the ones a compiler or kernel change moves.
VERSION_KEYS = ("torch", "iree", "torchao")


def _table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(text_columns([header, *rows]))


def _time(iso: str | None) -> str:
    return (iso or "")[:19].replace("T", " ")


def _sha(sha: str | None) -> str:
    return (sha or "")[:8] or "—"


def runs_table(runs: list[dict], where: str) -> str:
    """The runs the store holds, oldest first."""
    if not runs:
        return f"no runs in {where} yet (`benchflow history ingest results/report.json`)"
    rows = [[_time(r.get("time")), r["run_id"], _sha(r.get("head_sha")),
             r.get("head_branch") or "—", r.get("source") or "—", str(r.get("rows", "—")),
             r.get("host") or "—"] for r in runs]
    return (f"{len(runs)} run(s) in {where}\n"
            + _table(["time (UTC)", "run", "commit", "branch", "source", "rows", "host"], rows))


def versions_text(versions: dict | None) -> str:
    versions = versions or {}
    return " ".join(f"{k} {versions[k]}" for k in VERSION_KEYS if versions.get(k)) or "—"


def series_table(s: dict) -> str:
    better = "lower" if s.get("direction") == "lower" else "higher"
    unit = s.get("unit") or ""
    rows = []
    for p in s["points"]:
        values = p.get("values") or []
        spread = f"[{fmt(min(values))}, {fmt(max(values))}]" if len(values) > 1 else "—"
        rows.append([_time(p.get("time")), p["run_id"], _sha(p.get("head_sha")),
                     p.get("head_branch") or "—", fmt(p.get("value")), str(len(values)),
                     spread, p.get("host") or "—", versions_text(p.get("versions"))])
    header = ["time (UTC)", "run", "commit", "branch", f"value ({unit})" if unit else "value",
              "n", "range", "host", "versions"]
    return (f"{s['id']}  ({len(s['points'])} runs, {better} is better)\n"
            + _table(header, rows))


def series_tables(series: list[dict]) -> str:
    return "\n\n".join(series_table(s) for s in series)
