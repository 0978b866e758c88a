"""MkDocs hook: a page's links into the repository's code (`../workflow/planning/keys.py`).

MkDocs checks a page's links against docs/ alone, so in strict mode a link to a file of
the repository outside docs/ fails the build, although it is right on GitHub and in
site/ (which sits beside docs/, so `../` from a page reaches the same root). Such a link
to a file that exists is written as HTML, which MkDocs leaves as it is; one to a file
that does not exist is left to MkDocs, whose strict build then fails naming it."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

# [text](../path), not an image; the text may hold `code`.
LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\((\.\./[^)\s#]+)\)")
CODE = re.compile(r"`([^`\n]+)`")


def html_link(text: str, target: str) -> str:
    shown = CODE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(text, quote=False))
    return f'<a href="{html.escape(target)}">{shown}</a>'


def on_page_markdown(markdown: str, page, config, files) -> str:
    here = Path(page.file.abs_src_path).parent
    docs = Path(os.path.abspath(config["docs_dir"]))
    root = docs.parent

    def rewrite(m: re.Match) -> str:
        # normpath, not resolve: a linked checkout (the tests' copy of the guide) keeps
        # its root, and exists() still follows the link.
        target = Path(os.path.normpath(here / m.group(2)))
        inside = target.is_relative_to(root) and not target.is_relative_to(docs)
        return html_link(m.group(1), m.group(2)) if inside and target.exists() else m.group(0)

    return LINK.sub(rewrite, markdown)
