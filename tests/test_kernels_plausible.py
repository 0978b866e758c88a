"""An implausible profile (issue 37): rows whose time per call is far above what each
profiled call took by the clock are kept in the record, but the section's `error` says
why they are not the case's, so that the reports show no rows for it and attribution
divides nothing among them (regression/explain.profile_rows). On real profiles: the
tests/data/iree_profile bundles' rows and iree-benchmark-module's JSON.

CASES is the table of these inputs (tests/malformed_table.py renders it): (id, what the
profile is, the rows' ms per call, the ms each call took, the expected fragment)."""

from __future__ import annotations

import pytest

from tests.conftest import DATA
from workflow.backends.iree.profile import call_ms, dispatch_rows
from workflow.records.kernels import PLAUSIBLE_RATIO, implausible, kernels_section
from workflow.regression.explain import profile_rows

PROFILE = DATA / "iree_profile" / "ln_linear_gelu.local-task.dispatch.jsonl"
CALLS = 5  # the bundle's calls (tests/data/iree_profile/README.md)


def rows() -> list[dict]:
    return dispatch_rows(PROFILE.read_text())


def per_call() -> float:
    return sum(r["total_ms"] for r in rows()) / CALLS


CASES = [
    ("profile-rows-10x-the-call", "a profile whose dispatch rows sum to 10x the time each "
     "profiled call took (a unit read wrongly, another run's bundle)", 10.0,
     "implausible profile: its rows sum to 0.357 ms per call, 10.0x the 0.0357 ms each "
     "profiled call took"),
    ("profile-rows-2x-the-call", "rows that sum to twice the call's time: more overlap "
     "than a true profile shows", 2.0, "2.0x the 0.179 ms each profiled call took (at most "
     "1.5x expected)"),
]


@pytest.mark.parametrize("cid, desc, factor, expected", CASES, ids=[c[0] for c in CASES])
def test_a_profile_far_above_its_calls_time_is_marked_not_trusted(cid, desc, factor, expected):
    section = kernels_section(source="iree-profile", mode="host-execution", calls=CALLS,
                              rows=rows(), seconds=0.4, call_ms=per_call() / factor)
    assert expected in section["error"]
    assert section["rows"] and section["total_ms"] == pytest.approx(per_call() * CALLS)
    timed, why = profile_rows(section)  # what attribution is given: nothing, and why
    assert timed == [] and why.endswith(section["error"])


@pytest.mark.parametrize("factor", [1 / 3, 1.0, PLAUSIBLE_RATIO])
def test_a_profile_that_fits_its_calls_is_taken_as_it_is(factor):
    section = kernels_section(source="iree-profile", mode="host-execution", calls=CALLS,
                              rows=rows(), seconds=0.4, call_ms=per_call() / factor)
    assert section["error"] is None and profile_rows(section)[1] is None


def test_without_a_calls_time_nothing_is_held_against_the_rows():
    assert implausible(10.0, 5, None) is None and implausible(None, 5, 1.0) is None
    assert implausible(10.0, None, 1.0) is None  # compile-only: no calls
    section = kernels_section(source="iree-profile", mode=None, calls=CALLS, rows=[],
                              seconds=1.0, error="profiling (host-execution) failed: x",
                              call_ms=1e-9)
    assert section["error"] == "profiling (host-execution) failed: x"  # its own error kept


def test_the_profiling_invocations_time_per_call_is_its_benchmark_json():
    """iree-benchmark-module's JSON (the case's argv asks for it): the repetitions' mean
    real time per iteration; output that is not that gives none."""
    text = (DATA / "iree_benchmark_module.json").read_text()
    from workflow.backends.iree.tools import parse_benchmark_json
    reps = parse_benchmark_json(text).repetition_ms
    assert call_ms(text) == pytest.approx(sum(reps) / len(reps))
    assert call_ms("") is None and call_ms("not json") is None and call_ms("{}") is None
