"""How far outside load may explain a change (stats/verdict.load_reach): a disturbed
case whose change lies far beyond what the load this run measured did (to the case's
own clean invocations, or to the other cases of its run) is the code's; one within it
stays inconclusive. On a shared machine every run is disturbed, and before this no
slowdown, however large, failed the time gate (x5 with p=0.0003 was `inconclusive`)."""

from __future__ import annotations

from tests.test_goldens import make_case, make_report
from tests.test_run_level_verdict import SPREAD
from workflow.cli.main import main
from workflow.records.storage import write_json
from workflow.stats.drift import Drift
from workflow.stats.enums import Verdict
from workflow.stats.verdict import GoldenRef, Settings, judge, load_reach

CID = "host/iree/a-f32/baseline"
SETTINGS = Settings(tolerance=1.1, size_tolerance=1.05, p_value=0.05)
GOLDEN = GoldenRef(source="g", median_ms=1.0, invocation_medians_ms=SPREAD)
THRESHOLD = 0.25


def disturbed_case(clean_level: float, disturbed_level: float, n_disturbed: int,
                   cid: str = CID) -> dict:
    """A case whose last n_disturbed invocations ran while other processes took 60 % of
    the CPUs (above the threshold), at disturbed_level; the others clean at clean_level."""
    n = len(SPREAD)
    values = [(clean_level if i < n - n_disturbed else disturbed_level) * s
              for i, s in enumerate(SPREAD)]
    shares = [0.05 if i < n - n_disturbed else 0.6 for i in range(n)]
    case = make_case(cid, values)
    case["timing"].update(disturbed=True, disturbance={
        "disturbed": True, "threshold": THRESHOLD, "outside_share": shares,
        "retaken": 0, "retaken_ms": [],
        "reason": f"{n_disturbed} of {n} invocations ran while other processes used up "
                  "to 60% of the CPUs (threshold 25%)"})
    return case


def test_the_reach_is_the_cases_disturbed_invocations_over_its_clean_ones():
    case = disturbed_case(1.0, 1.4, 3)
    reach, said = load_reach(case["timing"], None, levelled=False)
    assert abs(reach - 1.4) < 0.03 and "3 disturbed invocation(s)" in said[0]
    # Nothing clean to set them against, no run level: nothing bounds the load.
    case["timing"]["disturbance"]["outside_share"] = [0.6] * len(SPREAD)
    assert load_reach(case["timing"], None, levelled=False) == (None, [])


def test_a_x5_change_under_load_is_a_regression():
    """x5 while the case's own disturbed invocations are only x1.1 of its clean ones:
    more than the load did to it."""
    out = judge(disturbed_case(5.0, 5.5, 3), GOLDEN, SETTINGS)
    assert out["verdict"] == Verdict.REGRESSION, out["reason"]
    assert "beyond what it can explain" in out["reason"] and "x1.1" in out["reason"]


def test_a_x1_3_change_under_a_measured_x1_4_disturbance_stays_inconclusive():
    """Its disturbed invocations x1.4 of its clean ones: a case at x1.3 is within what
    the load can make of unchanged code (its clean ones were measured in between the
    disturbed ones, under the same load)."""
    case = disturbed_case(1.3, 1.3 * 1.4, 3)
    undisturbed = make_case(CID, case["timing"]["invocation_medians_ms"])
    assert judge(undisturbed, GOLDEN, SETTINGS)["verdict"] == Verdict.REGRESSION
    out = judge(case, GOLDEN, SETTINGS)
    assert 1.25 < out["ratio"] < 1.35
    assert out["verdict"] == Verdict.INCONCLUSIVE, out["reason"]
    assert "within its reach: the load this run measured reaches x1.3" in out["reason"]


def test_the_runs_level_bounds_the_load_where_every_invocation_was_disturbed():
    """No clean invocation: the other cases of the run, measured under the same load,
    say how far it reached. x5 with the run at its level regresses; x1.3 with the run's
    cases spread as far stays inconclusive."""
    case = disturbed_case(5.0, 5.0, len(SPREAD))
    assert judge(case, GOLDEN, SETTINGS)["verdict"] == Verdict.INCONCLUSIVE
    quiet_run = Drift("cpu iree", 1.0, 0.02, 8)
    out = judge(case, GOLDEN, SETTINGS, quiet_run)
    assert out["verdict"] == Verdict.REGRESSION, out["reason"]
    loose_run = Drift("cpu iree", 1.0, 0.09, 8)   # 3 spreads: x1.31
    small = judge(disturbed_case(1.4, 1.4, len(SPREAD)), GOLDEN, SETTINGS, loose_run)
    assert small["verdict"] == Verdict.INCONCLUSIVE, small["reason"]


def test_check_fails_a_x5_case_under_load_with_the_rest_of_the_run_at_its_level(tmp_path,
                                                                                 capsys):
    """The gate end to end: six cases blessed, then a run in which every case was
    disturbed and one is x5."""
    ids = [f"host/iree/m{i}-f32/baseline" for i in range(6)]
    base = tmp_path / "base.json"
    write_json(base, make_report(*(make_case(c, SPREAD) for c in ids)))
    gdir = tmp_path / "goldens"
    assert main(["bless", "--report", str(base), "--goldens", str(gdir), "--yes"]) == 0
    new = tmp_path / "new.json"
    cases = [disturbed_case(5.0 if c == ids[0] else 1.0, 5.0 if c == ids[0] else 1.0,
                            len(SPREAD), c) for c in ids]
    write_json(new, make_report(*cases))
    capsys.readouterr()
    assert main(["check", "--report", str(new), "--goldens", str(gdir),
                 "--remeasure-budget", "0"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSED host/iree/m0-f32/baseline: time regressed" in out
    assert "1 of 6 case(s) regressed" in out
