"""A ratio as text (`1.500`, `1.234e+308`): three decimals where a reader compares
them, significant digits past that. A ratio read from a file (an ab.json, a report)
may be any finite float: `{:.3f}` of 1e308 is 310 digits on one line."""

from __future__ import annotations

# Past this, three decimals say nothing more and the integer part grows without bound.
PLAIN_BELOW = 1e4


def ratio_text(value: float) -> str:
    """`value` with three decimals when below PLAIN_BELOW in size, else in four
    significant digits (`1.234e+308`); inf and nan as Python writes them."""
    return f"{value:.3f}" if abs(value) < PLAIN_BELOW else f"{value:.4g}"
