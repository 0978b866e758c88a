"""The `--config` overrides on Snakemake's command line that Snakemake itself would refuse
with a traceback (its cli.parse_config raises ValueError, printed whole), and the
`--configfile` files that would block it (a FIFO), said in one line before it parses them.

This runs from the plugin's import, the only benchflow code Snakemake loads before it
parses its arguments (the logger plugins are imported while the argument parser is
built); the Snakefile runs too late. It judges only what Snakemake would refuse, by
Snakemake's own rule, so a valid override always gets through to the Snakefile, where the
suite's schema judges its value.
"""

from __future__ import annotations

import os
import re
import sys

from workflow.render.text import printable

# Snakemake's own rule for a --config key (snakemake/cli.py, parse_config), matched as it
# matches it (re.match: anchored at the start only, `$` at the end). A key of one
# character fails it too.
SNAKEMAKE_KEY = re.compile(r"[a-zA-Z_][\w-]*\w$")
# A part of a dotted key (`a.b=1`), meant as a path of nested keys.
NAME = re.compile(r"[a-zA-Z_][\w-]*\Z")
FLAGS = ("--config", "-C")
# What Snakemake refuses is a bad command line: exit as a bad input does
# (workflow/cli/options.EXIT_CODES).
BAD_INPUT_EXIT = 2


def is_snakemake_cli(argv0: str) -> bool:
    """Whether this process is Snakemake's command line (`snakemake ...` or `python -m
    snakemake ...`), not a script or a test that imports the plugin."""
    name = os.path.basename(argv0)
    return (name in ("snakemake", "snakemake.exe")
            or argv0.replace(os.sep, "/").endswith("snakemake/__main__.py"))


def flag_values(argv: list[str], flags: tuple[str, ...], short: str | None = None) -> list[str]:
    """The values of a list-taking option as argparse collects them: every word after one
    of `flags` up to the next option (nargs), or the value joined to it (`--flag=v`, and
    for a `short` flag `-Cv` / `-C=v`)."""
    entries, inside = [], False
    for word in argv:
        flag, eq, joined = word.partition("=")
        if word in flags:
            inside = True
        elif eq and flag in flags and flag.startswith("--"):
            entries.append(joined)
            inside = False
        elif short and word.startswith(short) and not word.startswith("--"):
            entries.append(word.removeprefix(short).removeprefix("="))
            inside = False
        elif word.startswith("-"):
            inside = False
        elif inside:
            entries.append(word)
    return entries


def config_entries(argv: list[str]) -> list[str]:
    """The --config / -C entries of a command line (nargs="*": `--config=a=1`, `-Ca=1`)."""
    return flag_values(argv, FLAGS, short="-C")


def _nested_example(key: str, value: str) -> str:
    """A dotted key's override as Snakemake takes it: `a.b.c=1` -> `a={b: {c: 1}}`."""
    first, *rest = key.split(".")
    inner = value or "null"
    for part in reversed(rest):
        inner = f"{{{part}: {inner}}}"
    return f"{first}={inner}"


def entry_problem(entry: str) -> str | None:
    """Why Snakemake would refuse one --config entry, in one line, or None if it takes it."""
    shown = printable(entry)
    if "=" not in entry:
        return (f"--config {shown}: expected KEY=VALUE; every word after --config up to the "
                f"next option is an entry, so put targets before it")
    key, value = entry.split("=", 1)
    if SNAKEMAKE_KEY.match(key):
        return None
    parts = key.split(".")
    if len(parts) > 1 and all(NAME.match(p) for p in parts):
        example = printable(_nested_example(key, value.strip("'\"")))
        return (f"--config {shown}: '{printable(key)}' is not a top-level key; Snakemake "
                f"takes key=value with a suite's top-level key and a YAML value, e.g. "
                f"--config '{example}'")
    return (f"--config {shown}: '{printable(key)}' is not a key Snakemake takes; expected "
            f"a name of letters, digits, _ and - that starts with a letter or _ and does "
            f"not end with - (2 characters at least)")


def config_problems(argv: list[str]) -> list[str]:
    """Every --config entry of a command line that Snakemake would refuse, a line each."""
    return [p for p in map(entry_problem, config_entries(argv)) if p is not None]


CONFIGFILE_FLAGS = ("--configfile", "--configfiles")


def configfile_entries(argv: list[str]) -> list[str]:
    """The --configfile paths of a command line (nargs="+", or `--configfile=PATH`)."""
    return flag_values(argv, CONFIGFILE_FLAGS)


def configfile_problems(argv: list[str]) -> list[str]:
    """A --configfile that is there and no regular file (a FIFO, a device, a directory,
    a socket, a link loop): Snakemake opens and reads each one while it parses its
    arguments, before the Snakefile runs, and a FIFO with no writer blocks it until it
    is killed (/dev/zero fills its memory). Judged by files.file_problem, which opens
    nothing; one that does not exist is left to Snakemake, which says so itself."""
    from workflow.files import file_problem

    out = []
    for entry in configfile_entries(argv):
        problem = file_problem(entry)
        if problem is not None and problem != "does not exist":
            out.append(f"--configfile {printable(entry)}: {problem}; expected a suite file "
                       "(YAML or JSON)")
    return out


def refuse_bad_config(argv: list[str]) -> None:
    """Ends Snakemake's command line (exit 2, a line per entry) when one of its --config
    entries would end it with a traceback, or one of its --configfile files would block
    it; does nothing for any other process."""
    if not argv or not is_snakemake_cli(argv[0]):
        return
    problems = config_problems(argv[1:]) + configfile_problems(argv[1:])
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        sys.exit(BAD_INPUT_EXIT)
