"""What users read: `benchflow --version`, and no internal issue number ("issue 20",
"(issue 38)") in any command's --help or in the user guide's pages. Users never saw
those issues; the text says what the behaviour is instead. docs/DESIGN.md, the
architecture as built, keeps its history."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from importlib.metadata import version

import pytest

from tests.conftest import REPO
from workflow.cli.main import build_parser

ISSUE = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)


def parsers(parser: argparse.ArgumentParser, name: str = "benchflow"):
    """(command line, parser) of `parser` and every subcommand below it."""
    yield name, parser
    for action in parser._actions:  # argparse lists subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from parsers(child, f"{name} {sub}")


def test_no_help_cites_an_issue_number():
    found = [(name, m.group(0)) for name, p in parsers(build_parser())
             for m in ISSUE.finditer(p.format_help())]
    assert len(list(parsers(build_parser()))) > 15  # every command and history verb
    assert not found, found


def user_pages():
    return [REPO / "README.md", *(p for p in sorted((REPO / "docs").glob("*.md"))
                                  if p.name != "DESIGN.md")]


@pytest.mark.parametrize("page", user_pages(), ids=lambda p: p.name)
def test_no_user_page_cites_an_issue_number(page):
    found = [(n, m.group(0)) for n, line in enumerate(page.read_text().splitlines(), 1)
             for m in ISSUE.finditer(line)]
    assert not found, f"{page.name}: {found}"


@pytest.mark.tool
def test_version_prints_the_package_version():
    done = subprocess.run([sys.executable, "-m", "workflow.cli.main", "--version"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]  # then the commit, IREE and torch (test_cli_flags)
    assert first == f"benchflow {version('benchflow')}"
    assert re.fullmatch(r"benchflow \d+\.\d+\.\d+\S*", first)
