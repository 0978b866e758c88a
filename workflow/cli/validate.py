"""`benchflow validate`: checks files without running anything, collecting every problem
(commands/validate.py, which also says how a file's kind is told: by content, not name).
A warning (a `warning:` line on stderr) is what only a run asking for the gate would be
refused for; the file is still valid (exit 0).
"""

from __future__ import annotations

import argparse
import sys

from workflow.commands.validate import KINDS, check_file
from workflow.render.text import printable


def add_parser(sub) -> None:
    p = sub.add_parser("validate", help="check suite, benchmark, golden, report and results "
                                        "files; every problem with file and key path")
    p.add_argument("files", nargs="+")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """A line per valid file saying what it was checked as; every problem on stderr."""
    problems = []
    for f in args.files:
        checked = check_file(f)
        problems += checked.problems
        if not checked.problems:
            print(f"{printable(f)}: {KINDS[checked.kind]}; valid")
        for w in checked.warnings:
            # Valid, but a run asking for the gate would be refused: said, not failed.
            print(printable(f"warning: {w}"), file=sys.stderr)
    for p in problems:
        # A problem quotes the user's text (a model file's exception, a file name): its
        # control characters are shown, not obeyed by the terminal.
        print(printable(p), file=sys.stderr)
    if not problems:
        print(f"ok: {len(args.files)} file(s) valid")
    return 1 if problems else 0
