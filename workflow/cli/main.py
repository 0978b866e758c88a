"""The `benchflow` command line: thin argument parsing over workflow functions."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from workflow.cli import (
    ab,
    benchmarks,
    bisect,
    bless,
    check,
    compare,
    coverage,
    history,
    run,
    validate,
)
from workflow.cli import list as list_cmd
from workflow.cli.options import Parser, print_problems
from workflow.errors import ConfigError

# The subcommands, in the order `benchflow --help` lists them. Each module's
# add_parser(sub) adds its parser and sets `func` to the module's run(args) -> int.
COMMANDS = (list_cmd, validate, run, coverage, bless, compare, check, ab, benchmarks, history,
            bisect)
# The exit status when whoever reads our output closed the pipe (`benchflow list | head
# -1`): 128 + SIGPIPE, what a shell reports for cat, grep or yes cut off the same way, so
# `set -o pipefail` scripts see benchflow as any other tool. Not 1: for `check` and `ab`
# that means a regression, and a reader that stopped reading is not one.
PIPE_CLOSED = 141
# The exit status after Ctrl-C: 128 + SIGINT, what a shell reports for any tool it
# interrupted, so that a script tells an interrupted run from a failed one; 128 + SIGTERM
# after SIGTERM.
INTERRUPTED = 130


def version() -> str:
    """The installed package's version (pyproject.toml's, through the package metadata
    that `pip install -e .` wrote)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("benchflow")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed: `pip install -e .` in the checkout)"


def version_text() -> str:
    """`benchflow --version`: the package's version, the checkout's commit, and the IREE
    and torch this interpreter has (what a bug report needs; from package metadata and
    git, nothing imported)."""
    from workflow.backends.git import git_sha
    from workflow.paths import REPO_ROOT
    from workflow.records.provenance import package_version

    sha = git_sha(REPO_ROOT)
    lines = [f"benchflow {version()}",
             f"  commit: {sha or 'unknown (not a git checkout)'} ({REPO_ROOT})"]
    for name in ("iree-base-compiler", "iree-base-runtime", "torch"):
        lines.append(f"  {name}: {package_version(name) or 'not installed'}")
    return "\n".join(lines)


class VersionAction(argparse.Action):
    """-V / --version: asks git and the package metadata only when given, not on every
    command's parse."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="benchflow", description=__doc__)
    parser.add_argument("-V", "--version", action=VersionAction,
                        help="the version, the commit, and the IREE and torch installed")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["--list"], ["-l"]):  # Forge's `benchmark.py --list`
        argv[0] = "list"
    args = build_parser().parse_args(argv)
    terminated = _hear_sigterm()
    try:
        return _run(args, terminated)
    finally:
        if terminated is not None:  # as it was: main() may be called again in-process
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run(args: argparse.Namespace, terminated: list[int] | None) -> int:
    try:
        try:
            code = args.func(args)
        except ConfigError as exc:
            print_problems(exc)
            code = 1
        # Flushed here, not at exit, so that a closed pipe is caught below: output to a
        # pipe is block-buffered, and most of it is still in the buffer when run() returns.
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _closed_pipe()
    except KeyboardInterrupt:
        # Ctrl-C: one line saying what became of the work, not a traceback. The tools a
        # command started have stopped by now (backends/proc.py waits for them).
        print(f"interrupted: {interrupted_line(args)}", file=sys.stderr, flush=True)
        return 128 + signal.SIGTERM if terminated else INTERRUPTED


def _hear_sigterm() -> list[int] | None:
    """SIGTERM (a CI job cancelled, `kill`) as Ctrl-C: the same one line, what the
    command keeps, and its tools and snakemake stopped on the way out (the default
    action ended benchflow at once, leaving them running). Where SIGTERM keeps its
    default and in the main thread only (None elsewhere); returns a list that holds the
    signal once heard."""
    heard: list[int] = []
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None

    def terminated(signum, frame) -> None:
        heard.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminated)
    return heard


def interrupted_line(args: argparse.Namespace) -> str:
    """What an interrupted command leaves: its own words where it set `interrupted` (a
    str, or a function of its arguments), else that it may simply be run again."""
    said = getattr(args, "interrupted", None)
    text = said(args) if callable(said) else said
    return text or f"benchflow {args.command}; run it again to finish"


def _closed_pipe() -> int:
    """The reader went away (Python's documented recipe, "Note on SIGPIPE"): what is
    left in stdout's buffer goes to devnull, so that the flush at interpreter exit does
    not fail again and print "Exception ignored ... BrokenPipeError"."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # not a file (output captured in-process)
        sys.stdout = os.fdopen(devnull, "w")
    return PIPE_CLOSED


if __name__ == "__main__":
    sys.exit(main())
