"""Every list of the user guide renders as a list: Markdown (Python-Markdown, which
MkDocs uses) takes a `- item` line right after a paragraph's line as more of the
paragraph, so a list without a blank line before it shows as one run-on paragraph on
the site while it looks right on GitHub."""

from __future__ import annotations

import re

import markdown
import pytest
import yaml

from tests.conftest import REPO

PAGES = sorted((REPO / "docs").glob("*.md"))
# A line of a paragraph that a reader meant as a list item.
ITEM = re.compile(r"^(?:[-*]|\d+\.) \S", re.M)


def extensions() -> list:
    """mkdocs.yml's markdown_extensions, as MkDocs gives them to Python-Markdown."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    return [e if isinstance(e, str) else next(iter(e)) for e in config["markdown_extensions"]]


def run_on_lists(text: str) -> list[str]:
    html = markdown.markdown(text, extensions=extensions())
    return [p[:80] for p in re.findall(r"<p>(.*?)</p>", html, re.S) if ITEM.search(p)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
@pytest.mark.slow
def test_every_list_renders_as_a_list(page):
    assert run_on_lists(page.read_text()) == []


def test_a_list_without_a_blank_line_before_it_is_found():
    assert run_on_lists("What it costs:\n- one\n- two\n")
    assert not run_on_lists("What it costs:\n\n- one\n- two\n")
