"""docs/malformed-inputs.md is the rendering of the tests' CASES tables, and long enough."""

from __future__ import annotations

from tests.conftest import REPO
from tests.malformed_table import render, rows


def test_the_malformed_inputs_table_is_up_to_date():
    doc = (REPO / "docs/malformed-inputs.md").read_text()
    assert doc == render(), "regenerate: python -m tests.malformed_table > docs/malformed-inputs.md"


def test_the_table_has_at_least_60_rows_with_unique_ids():
    ids = [(kind, cid) for kind, cid, *_ in rows()]
    assert len(ids) >= 60 and len(set(ids)) == len(ids)
