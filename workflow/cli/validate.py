"""`benchflow validate`: checks files without running anything, collecting every problem
(stages/validate.py, which also says how a file's kind is told: by content, not name).
"""

from __future__ import annotations

import argparse
import sys

from workflow.stages.validate import validate_files


def add_parser(sub) -> None:
    p = sub.add_parser("validate", help="check suite files; every problem with file and key path")
    p.add_argument("files", nargs="+")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    problems = validate_files(args.files)
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"ok: {len(args.files)} file(s) valid")
    return 1 if problems else 0
