"""The suite schema's defaults for code that judges without a whole suite (`benchflow
check`, `compare`, tests): config/schema.yaml is the one place that holds them, and the
pure statistics below (workflow.stats.verdict.Settings) take every value from a caller.
"""

from __future__ import annotations

from dataclasses import fields

from workflow.stats.changepoints import Settings as HistorySettings
from workflow.stats.verdict import Settings
from workflow.suite.schema import load_schema


def goldens_default(name: str):
    """The suite schema's default of goldens.<name>."""
    return load_schema()["properties"]["goldens"]["properties"][name]["default"]


def gate_settings(goldens: dict | None = None) -> Settings:
    """The gate's thresholds: a suite's `goldens` settings (validated suites have them
    all), each one left out at the suite schema's default."""
    g = goldens or {}
    return Settings(**{f.name: g.get(f.name, goldens_default(f.name)) for f in fields(Settings)})


def measurement_defaults() -> dict:
    """The suite schema's defaults of a SKU's `measurement` section."""
    props = load_schema()["$defs"]["sku"]["properties"]["measurement"]["properties"]
    return {k: v["default"] for k, v in props.items()}


def run_timeout_default() -> float:
    """The suite schema's default of timeouts.run_s."""
    return load_schema()["properties"]["timeouts"]["properties"]["run_s"]["default"]


def history_defaults() -> dict:
    """The suite schema's defaults of the `history` section (a suite that says nothing of
    its history, and the history commands run without a suite)."""
    props = load_schema()["properties"]["history"]["properties"]
    return {k: v["default"] for k, v in props.items()}


def history_settings(history: dict | None = None) -> HistorySettings:
    """The change-point detection's settings: a suite's `history` section, each one
    left out at the suite schema's default."""
    h = history or {}
    props = load_schema()["properties"]["history"]["properties"]
    return HistorySettings(**{f.name: h.get(f.name, props[f.name]["default"])
                              for f in fields(HistorySettings)})
