"""The bisection's search (workflow/bisect/search.py), pure: a fake step function stands
for the paired A/B, so the walk, the skips by content key and the stop on an inconclusive
step are checked without measuring anything."""

from __future__ import annotations

import pytest

from workflow.bisect.search import RETRY_SCALE, Revision, Step, bisect, groups
from workflow.regression.gate import PASSED, REGRESSED, UNJUDGED
from workflow.stats.enums import ABVerdict


def revs(keys: str) -> list[Revision]:
    """One revision per character, named c1, c2, ...; equal characters, equal keys."""
    return [Revision(f"c{i}", k) for i, k in enumerate(keys, 1)]


def fake(bad_from: int, *, undecided: set[str] = frozenset(), decided_on_retry=frozenset()):
    """A measure(base, new, scale, final): regression when `new` is at or after
    c<bad_from> and `base` before it, no difference otherwise; `undecided` revisions
    stay inconclusive, `decided_on_retry` ones are decided at the longer budget. Records
    every call (base, new, scale), and the pairs measured as final ones."""
    calls, finals = [], []

    def measure(base: str, new: str, scale: int, final: bool) -> Step:
        calls.append((base, new, scale))
        if final:
            finals.append((base, new))
        if new in undecided or (new in decided_on_retry and scale == 1):
            return Step(base, new, ABVerdict.INCONCLUSIVE, 1.01, [0.9, 1.1], 10)
        bad = int(new[1:]) >= bad_from > int(base[1:])
        return Step(base, new, ABVerdict.REGRESSION if bad else ABVerdict.NO_DIFFERENCE,
                    2.0 if bad else 1.0, [1.9, 2.1] if bad else [0.99, 1.01], 7)
    measure.calls, measure.finals = calls, finals
    return measure


def test_groups_are_runs_of_equal_keys():
    assert [[r.name for r in g] for g in groups(revs("aabbba"))] == [
        ["c1", "c2"], ["c3", "c4", "c5"], ["c6"]]


def test_the_walk_names_the_first_bad_group_and_skips_by_content():
    # 16 commits; keys change at c3, c7, c11 (the bad one) and c14.
    keys = "aabbbbccccddd" + "eee"
    measure = fake(11)
    result = bisect(revs(keys), measure)
    assert result["outcome"] == REGRESSED
    assert (result["first_bad"], result["last_good"]) == ("c11", "c7")
    # ends, two midpoints, then the final pair c7 -> c11 (the good end was not c7).
    assert measure.calls == [("c1", "c14", 1), ("c1", "c7", 1), ("c1", "c11", 1),
                             ("c7", "c11", 1)]
    assert result["measured"] == 4 and result["groups"] == 5
    assert measure.finals == [("c7", "c11")]  # measured to the final pair's rounds
    skipped = {s["revision"]: s["why"] for s in result["steps"] if s["kind"] == "skipped"}
    assert skipped["c2"] == "same inputs as c1" and skipped["c16"] == "same inputs as c14"
    assert len(skipped) == 16 - 5
    assert result["final"].ratio == 2.0


def test_a_bad_revision_next_to_the_good_end_reuses_the_ends_pair():
    measure = fake(2)
    result = bisect(revs("ab"), measure)
    assert result["first_bad"] == "c2" and measure.calls == [("c1", "c2", 1)]


def test_an_ends_pair_shorter_than_the_final_rounds_is_measured_again_as_final():
    # The fake's steps take 7 rounds: fewer than asked of the final pair, so the pair
    # that the answer reports is measured on its own, to its rounds.
    measure = fake(2)
    result = bisect(revs("ab"), measure, final_rounds=8)
    assert measure.calls == [("c1", "c2", 1), ("c1", "c2", 1)]
    assert measure.finals == [("c1", "c2")]
    assert [s["kind"] for s in result["steps"]] == ["ends", "final"]
    assert bisect(revs("ab"), fake(2), final_rounds=7)["measured"] == 1


def test_same_inputs_everywhere_measure_nothing():
    measure = fake(99)
    result = bisect(revs("aaaa"), measure)
    assert result["outcome"] == PASSED and measure.calls == []
    assert "same inputs" in result["summary"] and result["first_bad"] is None


def test_no_difference_between_the_ends_is_no_bad_revision():
    result = bisect(revs("abcd"), fake(99))
    assert result["outcome"] == PASSED and result["first_bad"] is None
    assert result["summary"].startswith("no bad revision: c4 is no difference")


def test_an_inconclusive_step_is_retried_longer_then_decides():
    measure = fake(3, decided_on_retry={"c2"})
    result = bisect(revs("abcd"), measure)
    assert ("c1", "c2", 1) in measure.calls and ("c1", "c2", RETRY_SCALE) in measure.calls
    assert result["outcome"] == REGRESSED and result["first_bad"] == "c3"
    retried = [s for s in result["steps"] if s["revision"] == "c2"]
    assert [s["retried"] for s in retried] == [False, True]


def test_a_step_still_inconclusive_stops_and_says_the_range_left():
    measure = fake(3, undecided={"c3"})
    result = bisect(revs("abcde"), measure)
    assert result["outcome"] == UNJUDGED and result["first_bad"] is None
    assert result["range"] == ["c1", "c5"]
    assert "c3 stayed inconclusive" in result["summary"]
    assert measure.calls[-2:] == [("c1", "c3", 1), ("c1", "c3", RETRY_SCALE)]


def test_inconclusive_ends_are_not_bisected():
    measure = fake(3, undecided={"c4"})
    result = bisect(revs("abcd"), measure)
    assert result["outcome"] == UNJUDGED and len(measure.calls) == 2


def test_history_detect_prints_the_bisect_command_of_a_change():
    from workflow.history.detect import bisect_command

    case = "sync/iree/w/baseline"
    assert bisect_command(case, {"head_sha": "aaa1"}, {"head_sha": "bbb2-dirty"}) == (
        f"benchflow bisect {case} --good aaa1 --bad bbb2 --configfile SUITE")
    same = {"head_sha": "aaa1", "versions": {"iree": "3.9.0", "torch": "2.9"}}
    newer = {"head_sha": "aaa1", "versions": {"iree": "3.10.0", "torch": "2.9"}}
    assert bisect_command(case, same, newer) == (
        f"benchflow bisect {case} --package iree-base-compiler --good 3.9.0 --bad 3.10.0 "
        "--configfile SUITE")
    assert bisect_command(case, same, same) is None
    # A case id from the store is quoted for the shell the line is pasted into.
    assert bisect_command("a b;rm -rf x", {"head_sha": "aaa1"}, {"head_sha": "bbb2"}) == (
        "benchflow bisect 'a b;rm -rf x' --good aaa1 --bad bbb2 --configfile SUITE")


def test_skipped_revisions_name_the_one_whose_inputs_they_share():
    result = bisect(revs("aab"), fake(3))
    skipped = [s for s in result["steps"] if s["kind"] == "skipped"]
    assert skipped == [{"revision": "c2", "kind": "skipped", "verdict": None,
                        "same_as": "c1", "why": "same inputs as c1"}]


def test_the_text_output_shows_short_shas_and_the_json_full_ones():
    from workflow.cli.bisect import text_lines

    shas = [f"{i:x}" * 40 for i in range(1, 4)]
    revisions = [Revision(shas[0], "a"), Revision(shas[1], "a"), Revision(shas[2], "b")]
    result = bisect(revisions, fake_by_position(shas))
    result.update(kind="commit", revisions=shas, final=None)
    text = "\n".join(text_lines(result, lambda sha: sha[:12]))
    assert shas[2][:12] in text and not any(sha in text for sha in shas), text
    assert f"skipped {shas[1][:12]}: same inputs as {shas[0][:12]}" in text
    assert result["first_bad"] == shas[2] and result["last_good"] == shas[0]


def fake_by_position(names: list[str]):
    """A measure where the last of `names` is slower than the others."""
    def measure(base, new, scale, final):
        bad = new == names[-1]
        return Step(base, new, ABVerdict.REGRESSION if bad else ABVerdict.NO_DIFFERENCE,
                    2.0 if bad else 1.0, [1.9, 2.1], 8)
    return measure


def test_history_detect_hints_name_the_suite_it_was_given():
    from pathlib import Path

    from workflow.cli.history import _suite_in_hints

    hint = "benchflow bisect c --good a --bad b --configfile SUITE"
    result = {"change_points": [{"bisect": hint}]}
    lines = _suite_in_hints(result, [f"  to find its cause: {hint}"], Path("my suite.yaml"))
    assert lines == ["  to find its cause: benchflow bisect c --good a --bad b "
                     "--configfile 'my suite.yaml'"]
    assert result["change_points"][0]["bisect"].endswith("--configfile 'my suite.yaml'")
    result = {"change_points": [{"bisect": hint}]}
    placeholder = _suite_in_hints(result, [f"  to find its cause: {hint}"], None)[0]
    assert "--configfile SUITE  (SUITE: the suite file that measured the case" in placeholder
    assert result["change_points"][0]["bisect"] == hint


def dag(spec: str) -> list[Revision]:
    """Revisions from `name:key:parent,parent` words, parents first."""
    out = []
    for word in spec.split():
        name, key, *parents = word.split(":")
        out.append(Revision(name, key, tuple(parents[0].split(",")) if parents else ()))
    return out


def fake_set(bad: set[str], *, failed: set[str] = frozenset()):
    """A measure where the revisions in `bad` are slower than the others; `failed` ones
    do not build. Records every call (base, new)."""
    calls = []

    def measure(base, new, scale, final):
        calls.append((base, new))
        if new in failed:
            return Step(base, new, ABVerdict.FAILED, row={"error": f"{new}: compile failed"})
        slow = new in bad and base not in bad
        return Step(base, new, ABVerdict.REGRESSION if slow else ABVerdict.NO_DIFFERENCE,
                    2.0 if slow else 1.0, [1.9, 2.1] if slow else [0.99, 1.01], 8)
    measure.calls = calls
    return measure


def test_a_regression_on_a_merged_side_branch_is_found_on_the_branch():
    # G, then a side branch S1 (the regression) and three mainline commits M1..M3,
    # merged at X. rev-list's line puts S1 before the mainline: binary search over the
    # line measured M1, M2, M3 (all good) and named the merge. The walk over the graph
    # measures M2, then S1, and names S1 against its own parent.
    revisions = dag("G:a S1:b:G M1:c:G M2:d:M1 M3:e:M2 X:f:M3,S1")
    measure = fake_set({"S1", "X"})
    result = bisect(revisions, measure)
    assert result["outcome"] == REGRESSED
    assert (result["first_bad"], result["last_good"]) == ("S1", "G")
    assert measure.calls == [("G", "X"), ("G", "M2"), ("G", "S1")]


def test_a_merge_with_one_sides_inputs_is_not_measured():
    # The mainline commit changed only other files (G's key); the merge took the side
    # branch's model as it was: neither can have changed the case.
    revisions = dag("G:a S1:b:G M1:a:G X:b:M1,S1")
    measure = fake_set({"S1", "X"})
    result = bisect(revisions, measure)
    assert result["first_bad"] == "S1" and measure.calls == [("G", "S1")]
    skipped = {s["revision"]: s["same_as"] for s in result["steps"] if s["kind"] == "skipped"}
    assert skipped == {"M1": "G", "X": "S1"} and result["groups"] == 2


def test_a_merge_whose_sides_are_both_good_is_the_first_bad_one():
    revisions = dag("G:a A:b:G B:c:G X:d:A,B Y:e:X")
    result = bisect(revisions, fake_set({"X", "Y"}))
    assert (result["first_bad"], result["last_good"]) == ("X", "A")  # its first parent
    assert result["final"].base == "A"


def old_walk(keys: str, bad_from: int) -> list[tuple[str, str]]:
    """The steps of binary search over the groups of a line, as bisect walked before it
    walked the graph: the pairs that a line of commits must still be measured with."""
    reps = [f"c{i}" for i, k in enumerate(keys, 1) if i == 1 or keys[i - 2] != k]
    bad = [int(r[1:]) >= bad_from for r in reps]
    calls = [(reps[0], reps[-1])]
    if not bad[-1]:
        return calls
    lo, hi = 0, len(reps) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        calls.append((reps[0], reps[mid]))
        lo, hi = (lo, mid) if bad[mid] else (mid, hi)
    return calls + ([(reps[lo], reps[hi])] if lo else [])


@pytest.mark.slow
def test_a_line_is_walked_as_binary_search_walked_it():
    import random

    rng = random.Random(7)
    for n in range(2, 60):
        keys = "".join(rng.choice("abc") for _ in range(n))
        keys = keys[:-1] + ("d" if keys[-2:-1] != "d" else "e")  # the bad end's own key
        for bad_from in range(2, n + 1):
            measure = fake(bad_from)
            result = bisect(revs(keys), measure)
            calls = [(base, new) for base, new, _ in measure.calls]
            assert calls == old_walk(keys, bad_from), (keys, bad_from)
            assert result["outcome"] in (REGRESSED, PASSED)


def test_a_revision_that_cannot_be_prepared_is_skipped_for_a_neighbour():
    # c3 (the first midpoint) has a syntax error: its key is its own and it is not
    # measured; c4 is measured instead and the search goes on to c5.
    revisions = revs("abcdef")
    revisions[2] = Revision("c3", "? c3", broken="its suite does not load: bad yaml")
    measure = fake(5)
    result = bisect(revisions, measure)
    assert result["outcome"] == REGRESSED and result["first_bad"] == "c5"
    assert all("c3" not in call for call in measure.calls)
    kinds = [(s["kind"], s["revision"]) for s in result["steps"]]
    assert kinds[:4] == [("ends", "c6"), ("skipped", "c3"), ("step", "c4"), ("step", "c5")]
    assert "its suite does not load" in result["steps"][1]["why"]


def test_a_revision_that_does_not_build_is_skipped_not_a_stop():
    measure = fake_set({"c5", "c6"}, failed={"c3"})
    result = bisect(revs("abcdef"), measure)
    assert result["outcome"] == REGRESSED and result["first_bad"] == "c5"
    assert measure.calls.count(("c1", "c3")) == 2  # retried once, as a failed step is
    skip = next(s for s in result["steps"] if s["kind"] == "skipped" and s["revision"] == "c3")
    assert "compile failed" in skip["why"]
    from workflow.cli.bisect import text_lines

    result.update(kind="commit", revisions=[f"c{i}" for i in range(1, 7)], final=None)
    assert ("  skipped c3: could not be measured (c3: compile failed); skipped, a neighbour "
            "measured instead") in text_lines(result, str)


def test_only_unmeasurable_revisions_left_is_a_range():
    revisions = revs("abcde")
    revisions[2] = Revision("c3", "? c3", broken="its model raised at import")
    result = bisect(revisions, fake(3))
    assert result["outcome"] == UNJUDGED and result["first_bad"] is None
    assert result["candidates"] == ["c3", "c4"] and result["range"] == ["c2", "c4"]
    assert "one of c3, c4" in result["summary"]


def test_the_text_output_lists_a_range_of_skipped_revisions_in_one_line():
    from workflow.cli.bisect import text_lines

    revisions = revs("a" * 998 + "bb")
    revisions[500] = Revision("c501", "? c501", broken="its model raised at import")
    result = bisect(revisions, fake(999))
    result.update(kind="commit", revisions=[r.name for r in revisions], final=None)
    text = text_lines(result, str)
    assert "  skipped 499 revisions c2..c500: same inputs as c1" in text, text
    assert "  skipped 1 revisions" not in "\n".join(text)
    assert "  skipped c1000: same inputs as c999" in text
    assert len(text) < 12
