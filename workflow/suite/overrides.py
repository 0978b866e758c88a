"""Snakemake's --config overrides as a suite file would give them."""

from __future__ import annotations

import re

import yaml

from workflow.errors import ConfigError

# A --config key as Snakemake accepts one (snakemake/cli.py, parse_config).
KEY = re.compile(r"[a-zA-Z_][\w-]*\w$")


def parse_entries(entries: list[str]) -> dict:
    """`--config KEY=VALUE ...` read as `snakemake --config` reads it (snakemake/cli.py,
    parse_config: quotes around the value dropped; an int, else a float, else True or
    False, else YAML with strings only, else the text; nothing is None; a later entry
    merged into an earlier one), for the commands that load a suite without snakemake
    (`benchflow list`, `benchmarks`). Not Snakemake's function itself: importing
    snakemake.cli loads every executor plugin, and the SLURM one runs `which sacct` and
    `which squeue` on import. tests/test_cli_flags.py holds the two to the same
    answers. A bad entry is a ConfigError naming it."""
    from workflow.suite.schema import deep_merge

    config: dict = {}
    problems = []
    for entry in entries:
        key, eq, text = entry.partition("=")
        if not eq or not KEY.match(key):
            problems.append(f"--config {entry}: expected KEY=VALUE, KEY a suite key (a "
                            "letter or _, then letters, digits, _ or -, ending in no -)")
            continue
        config = deep_merge(config, {key: _entry_value(text.strip("'\""))})
    if problems:
        raise ConfigError(problems)
    return config


def _entry_value(text: str):
    if text == "":
        return None
    for read in (int, float, _bool, lambda t: yaml.load(t, Loader=yaml.BaseLoader)):
        try:
            return read(text)
        except (ValueError, yaml.YAMLError):
            continue
    return text


def _bool(text: str) -> bool:
    if text in ("True", "False"):
        return text == "True"
    raise ValueError(text)


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
