"""Snakemake's --config overrides as a suite file would give them."""

from __future__ import annotations

import yaml


def yaml_scalars(value):
    """A --config override's value with every scalar inside a mapping or list read as YAML
    reads it (`30` an int, `0.5` a float, `true` a bool, `null` or nothing None; any other
    text stays text), so `--config 'timeouts={run_s: 30}'` sets a number. Snakemake
    types a top-level value itself but parses a nested one with YAML's BaseLoader, which
    leaves every scalar a string (and drops quotes: `{dir: "30"}` is read as 30 too, as
    it would be unquoted in a suite file). The schema judges the result as it judges a
    suite file's."""
    if isinstance(value, dict):
        return {k: _yaml_scalar(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_yaml_scalar(v) for v in value]
    return value


def _yaml_scalar(value):
    if not isinstance(value, str):
        return yaml_scalars(value)
    try:
        read = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    # Only what a bare scalar of a suite file would become; a date or a mapping stays text.
    return read if read is None or isinstance(read, bool | int | float) else value
