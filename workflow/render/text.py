"""Plain text a terminal or Markdown shows: text from outside benchflow with its control
characters escaped, and rows of cells as aligned columns. Pure functions, for every
command and renderer that prints."""

from __future__ import annotations

import re

# Control characters (C0, DEL, C1) but newline and tab, and the bidirectional overrides
# (which reorder what a reader sees): a terminal obeys them (clear the screen, set the
# window title, move the cursor) and a Markdown viewer hides them.
_UNSHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """Text from outside benchflow (a tool's message, a dispatch name, a user's model or
    file name) as it may be shown on a terminal or in Markdown: each control character
    written as its Python escape (ESC as \\x1b), so the reader sees the bytes rather than
    their effect. HTML escapes its own way (render/templating.py)."""
    return _UNSHOWN.sub(lambda m: repr(m.group())[1:-1], text)


def clipped(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: whole when it fits, else cut at the last
    space before the limit (a word cut in two, `SyntaxErr`, reads as another word) and
    ended with `...`; a first word longer than the limit is cut where it must be."""
    if len(text) <= limit:
        return text
    head = text[:limit - 3]
    if " " in head:
        head = head[:head.rindex(" ")]
    return head.rstrip(" ,;:(") + "..."


def text_columns(rows: list[list[str]]) -> list[str]:
    """Rows of cells as plain-text lines, each column as wide as its widest cell, two
    spaces apart (the terminal tables of `coverage` and `history show`)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if rows else []
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]
