"""File entry points of the render rules: read results/report.json (and the measured
peak), render one format, write it atomically. The one adapter scripts/render.py calls
the function named like its rule (measure_peak, render_markdown, ...)."""

from __future__ import annotations

import json

from workflow.backends import peak
from workflow.records.ab import read_ab
from workflow.records.storage import read_json, write_json, write_text
from workflow.render import ab as ab_render
from workflow.render import csv_report, dashboard, html, markdown


def _peak(path) -> dict | None:
    """results/peak.json, when the suite times a case on the CPU (plan.peak_input: a
    Snakemake input that is a list, empty otherwise)."""
    if isinstance(path, list | tuple):
        path = path[0] if path else None
    return read_json(path) if path else None


def measure_peak(out: str) -> dict:
    result = peak.measure()
    write_json(out, result)
    return result


def _ab(ab_path) -> dict | None:
    """results/ab.json when the suite has A/B pairs (a Snakemake input that may be a list),
    checked as the gate checks it: a damaged one is a one-line refusal, not a crash."""
    if isinstance(ab_path, list | tuple):
        ab_path = ab_path[0] if ab_path else None
    return read_ab(ab_path, rows_only=True) if ab_path else None


def render_markdown(report: str, out: str, ab_path: str | None = None) -> None:
    text = markdown.render(read_json(report), source=report)
    ab = _ab(ab_path)
    write_text(out, text + (ab_render.markdown(ab) if ab else ""))


def render_csv(report: str, out: str, peak_path: str | None = None) -> None:
    write_text(out, csv_report.render(read_json(report), _peak(peak_path)))


def render_dashboard(report: str, out: str, peak_path: str | None = None) -> None:
    """Validated against workflow/schemas/dashboard.schema.json before it is written."""
    records = dashboard.render(read_json(report), _peak(peak_path))
    write_text(out, json.dumps(records, indent=1, allow_nan=False) + "\n")


def render_html(report: str, out: str, peak_path: str | None = None,
                ab_path: str | None = None, history_link: bool = False) -> None:
    page = html.render(read_json(report), _peak(peak_path), history_link=history_link)
    ab = _ab(ab_path)
    if ab:
        page = page.replace("</body>", ab_render.html(ab) + "</body>", 1)
    write_text(out, page)
