"""The JSON schemas benchflow ships (report, A/B, dashboard, goldens, benchmark file) and
their one loader, in the lowest layer so that every package reads them the same way
(stats/enums.py makes the record's statuses and verdicts from report.schema.json).
Imports nothing of benchflow."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources


@cache
def load(name: str) -> dict:
    """The package's schema `workflow/schemas/<name>.schema.json` (cached: do not modify)."""
    return json.loads(resources.files("workflow.schemas").joinpath(f"{name}.schema.json")
                      .read_text())
