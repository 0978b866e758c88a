"""The guide's generated and quoted tables are current: docs/malformed-inputs.md is the
rendering of the tests' CASES tables, and long enough; the exit codes the Goldens page and
the README give are the gates' own (workflow/cli/options.EXIT_CODES)."""

from __future__ import annotations

import re

from tests.conftest import REPO
from tests.malformed_table import render, rows
from workflow.cli.options import EXIT_CODES


def test_the_malformed_inputs_table_is_up_to_date():
    doc = (REPO / "docs/malformed-inputs.md").read_text()
    assert doc == render(), "regenerate: python -m tests.malformed_table > docs/malformed-inputs.md"


def test_the_table_has_at_least_60_rows_with_unique_ids():
    ids = [(kind, cid) for kind, cid, *_ in rows()]
    assert len(ids) >= 60 and len(set(ids)) == len(ids)


def test_the_exit_code_tables_are_the_gates_own():
    page = (REPO / "docs/goldens.md").read_text()
    rows = dict(re.findall(r"^\| (\d) \| `([\w-]+)` \|", page, re.M))
    assert {int(code): outcome for code, outcome in rows.items()} == {
        code: outcome for outcome, code in EXIT_CODES.items()}
    readme = " ".join((REPO / "README.md").read_text().split())
    words = {"passed": "judged and passed", "regressed": "regressed",
             "bad-input": "bad input", "could-not-judge": "could not judge"}
    summary = ", ".join(f"{code} {words[outcome]}" for outcome, code in
                        sorted(EXIT_CODES.items(), key=lambda item: item[1]))
    assert f"Exit codes: {summary}" in readme
