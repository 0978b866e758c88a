"""The `benchflow` command line: thin argument parsing over workflow functions."""

from __future__ import annotations

import argparse
import sys

from workflow.cli import ab, benchmarks, bless, check, compare, coverage, run, validate
from workflow.cli import list as list_cmd
from workflow.errors import ConfigError

# The subcommands, in the order `benchflow --help` lists them. Each module's
# add_parser(sub) adds its parser and sets `func` to the module's run(args) -> int.
COMMANDS = (list_cmd, validate, run, coverage, bless, compare, check, ab, benchmarks)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchflow", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["--list"], ["-l"]):  # Forge's `benchmark.py --list`
        argv[0] = "list"
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
