"""A run's common drift taken out before its cases are judged (stats/drift.py,
regression/drift.py): on the rerun the 2-core machine measured, and in simulation."""

from __future__ import annotations

import math
import random
from dataclasses import asdict
from pathlib import Path

import pytest

from workflow.records.report import read_report
from workflow.regression import drift, gate
from workflow.stats import verdict
from workflow.stats.drift import MIN_CASES, Drift, common_drift
from workflow.stats.enums import Verdict
from workflow.suite.defaults import gate_settings

DATA = Path(__file__).parent / "data" / "rerun"


def settings() -> dict:
    return {**asdict(gate_settings(None)), "accept_config": []}


def judged(report: dict) -> dict[str, dict]:
    again = gate.rejudge(report, DATA / "goldens", settings())
    return {c["id"]: c["golden"] for c in again["cases"]}


BERT = "cpu-host/iree/bert-tiny-1x32-f32/baseline"


def scaled(report: dict, factor: float, which) -> dict:
    """`report` with the times of its cases for which which(case) holds x `factor`."""
    for c in report["cases"]:
        if which(c) and c.get("timing"):
            t = c["timing"]
            t["invocation_medians_ms"] = [x * factor for x in t["invocation_medians_ms"]]
            t["median_ms"] *= factor
    return report


def slowed(scale: float, backend: str = "iree") -> dict:
    """The rerun with every case of `backend` x `scale`."""
    return scaled(read_report(DATA / "default-7.report.json"), scale,
                  lambda c: c["backend"] == backend)


def one_slower(scale: float, cid: str = BERT) -> dict:
    """The rerun with one case x `scale`."""
    return scaled(read_report(DATA / "default-7.report.json"), scale,
                  lambda c: c["id"] == cid)


def test_a_rerun_of_unchanged_code_that_moved_as_a_whole_is_no_regression(monkeypatch):
    report = read_report(DATA / "default-7.report.json")
    goldens = judged(report)
    assert not [cid for cid, g in goldens.items() if g["verdict"] == Verdict.REGRESSION]
    torch = {cid: g for cid, g in goldens.items() if "/torch-" in cid and g.get("drift")}
    assert len(torch) == 5
    # The torch cases moved x1.14 together: past the tolerance, so no pass either, and
    # the reason says what moved and what to do.
    level = next(iter(torch.values()))["drift"]
    assert level["group"] == "cpu torch" and level["factor"] > 1.1 and level["cases"] == 5
    for g in torch.values():
        assert g["verdict"] == Verdict.INCONCLUSIVE
        assert "moved x1.1" in g["reason"] and "check --against-history" in g["reason"]
    # Case by case (the drift left in), the same run is a regression.
    monkeypatch.setattr(drift, "rejudged", lambda cases, judge: cases)
    alone = judged(report)
    assert [cid for cid, g in alone.items() if g["verdict"] == Verdict.REGRESSION]


def test_one_case_that_moved_beyond_its_runs_level_is_a_regression():
    slow = BERT
    goldens = judged(one_slower(1.5))
    assert goldens[slow]["verdict"] == Verdict.REGRESSION, goldens[slow]["reason"]
    assert goldens[slow]["drift"]["group"] == "cpu iree"
    assert [cid for cid, g in goldens.items() if g["verdict"] == Verdict.REGRESSION] == [slow]


def case(cid: str, backend: str, median: float, golden: float, **extra) -> dict:
    return {"id": cid, "backend": backend, "device": "cpu", "status": "ok",
            "timing": {"median_ms": median}, **extra,
            "golden": {"value_ms": golden, "source": "goldens/cpu.json"}}


def test_groups_are_a_device_and_a_backend_family_with_enough_cases():
    cases = ([case(f"i{k}", "iree", 1.2, 1.0) for k in range(MIN_CASES)]
             + [case(f"t{k}", "torch-eager" if k % 2 else "torch-inductor", 0.9, 1.0)
                for k in range(MIN_CASES - 1)]
             # A benchmark file's golden is another machine's threshold, not a level.
             + [case("f", "iree", 3.0, 1.0, provenance={"benchmark_file": "clip.json"})])
    cases[-1]["golden"]["source"] = "clip.json"
    found = drift.drifts(cases)
    assert set(found) == {"cpu iree"}
    assert found["cpu iree"].factor == pytest.approx(1.2)
    assert found["cpu iree"].cases == MIN_CASES
    seen = []
    drift.rejudged(cases, lambda c, d: seen.append(c["id"]) or c["golden"])
    assert seen == [f"i{k}" for k in range(MIN_CASES)]


def test_the_level_is_the_median_and_the_spread_robust():
    assert common_drift("g", [1.0] * (MIN_CASES - 1)) is None
    d = common_drift("g", [1.1, 1.1, 1.1, 1.12, 1.08, 3.0])
    assert d.factor == pytest.approx(1.1) and d.cases == 6
    assert d.spread < 0.02          # one case far off moves neither


def simulate(trials: int, step: float, *, with_drift: bool, seed: int = 7) -> list[int]:
    """Regressions called per trial: 8 cases, goldens from one run, a second run that
    moved as a whole (log-normal, 8 %) with 2 % left per case between runs and 1 % between
    invocations; case 0 made `step` slower."""
    rng = random.Random(seed)
    s = verdict.Settings(tolerance=1.1, size_tolerance=1.05, p_value=0.05)
    calls = []
    for _ in range(trials):
        level = math.exp(rng.gauss(0, 0.08))
        runs = []
        for k in range(8):
            truth = 1.0 + k
            g = [truth * math.exp(rng.gauss(0, 0.01)) for _ in range(7)]
            new_centre = truth * level * math.exp(rng.gauss(0, 0.02)) * (step if k == 0 else 1)
            n = [new_centre * math.exp(rng.gauss(0, 0.01)) for _ in range(7)]
            runs.append((n, verdict.GoldenRef("g", sorted(g)[3], tuple(g))))
        ratios = [sorted(n)[3] / ref.median_ms for n, ref in runs]
        d: Drift | None = common_drift("cpu iree", ratios) if with_drift else None
        found = [verdict.time_verdict(n, False, ref, s.tolerance, s.p_value, d).verdict
                 for n, ref in runs]
        calls.append([k for k, v in enumerate(found) if v == Verdict.REGRESSION])
    return calls


@pytest.mark.slow
def test_simulated_reruns_are_judged_against_their_level():
    alone = simulate(300, 1.0, with_drift=False)
    level = simulate(300, 1.0, with_drift=True)
    false_alone = sum(len(c) for c in alone) / (300 * 8)
    false_level = sum(len(c) for c in level) / (300 * 8)
    assert false_alone > 0.05          # the whole run past x1.1: every case "regressed"
    assert false_level < 0.01
    caught = simulate(300, 1.3, with_drift=True)
    assert sum(c == [0] for c in caught) / 300 > 0.9


def test_compare_names_a_group_that_moved_as_a_whole():
    from workflow.regression.compare import compare, to_markdown

    base = read_report(DATA / "default-7.report.json")
    new = scaled(read_report(DATA / "default-7.report.json"), 1.2,
                 lambda c: c["backend"].startswith("torch"))
    result = compare(base, new)
    levels = {d["group"]: d["factor"] for d in result["levels"]}
    assert levels["cpu torch"] == pytest.approx(1.2) and levels["cpu iree"] == pytest.approx(1)
    text = to_markdown(result)
    assert "| level of the 5 cpu torch cases (their median) | ×1.2000 (+20.0%) |" in text
    assert "moved past the tolerance as a whole" in text
    assert "moved past" not in to_markdown(compare(base, base))


def test_the_lines_and_the_reports_name_the_level():
    from workflow.render.common import verdict_text

    slow = BERT
    again = gate.rejudge(one_slower(1.5), DATA / "goldens", settings())
    [finding] = gate.findings(again)
    assert "(of its run's level: the cpu iree cases moved x1.1" in finding.line()
    case = next(c for c in again["cases"] if c["id"] == slow)
    assert verdict_text(case).startswith("regression ×1.")
    assert " of level ×1.1" in verdict_text(case)


def test_check_of_the_rerun_could_not_judge_the_level_and_says_how_to(capsys):
    from workflow.cli.main import main

    rc = main(["check", "--report", str(DATA / "default-7.report.json"),
               "--goldens", str(DATA / "goldens"), "--remeasure-budget", "0"])
    out = capsys.readouterr().out
    assert rc == 3, out
    assert "REGRESSED" not in out
    assert ("COULD NOT JUDGE cpu-host/torch-eager/linear-128x256x256-f32/baseline: "
            "inconclusive: the 5 cpu torch cases of this run moved x1.133 together") in out
    assert "judge against several runs" in out


def test_check_measures_again_no_case_whose_level_moved():
    """Its run's level, not its invocations, is what could not be judged: more of them
    cannot tell the machine from the code. Each says so (NOT REMEASURED), as
    docs/goldens.md promises of every case not measured again."""
    from workflow.gating.remeasure import NotFeasible, remeasure_inconclusive

    def invoke(argv):
        raise NotFeasible("not measured in this test")

    def remeasured(scale: float):
        report = slowed(scale)
        report = gate.rejudge(report, DATA / "goldens", settings())
        return report, remeasure_inconclusive(report, budget_s=30,
                                              goldens_dir=DATA / "goldens", invoke=invoke)
    # As measured, its noisy mlp case is tried again (the outcome says why it was not).
    _, (_, outcomes) = remeasured(1.0)
    assert [o.case_id for o in outcomes if not o.why.startswith("its run's level")] == [
        "cpu-host/iree/mlp-64x256x512-f32/baseline"]
    report, (_, outcomes) = remeasured(1.3)
    iree = [c for c in report["cases"] if c["backend"] == "iree" and c["golden"].get("drift")]
    assert all(drift.level_moved(c["golden"]) for c in iree) and len(iree) == 8
    inconclusive = [c["id"] for c in report["cases"]
                    if c["golden"].get("verdict") == "inconclusive"]
    assert inconclusive and [o.case_id for o in outcomes] == inconclusive
    assert all(o.line().startswith(f"NOT REMEASURED {o.case_id}: its run's level moved "
                                   "past the tolerance") for o in outcomes)


def test_a_level_past_the_tolerance_is_never_counted_as_ok():
    report = gate.rejudge(slowed(1.3), DATA / "goldens", settings())
    for allow in (False, True):
        a = gate.assess(report, allow_inconclusive=allow)
        assert a.outcome == gate.UNJUDGED
        assert sum(nj.kind == gate.LEVEL for nj in a.unjudged) >= 7


def test_goldens_of_several_runs_judge_a_whole_group_that_moved():
    """Their spread holds how far runs move as a whole: a level past it is a change."""
    report = slowed(1.3)
    s = verdict.Settings(tolerance=1.1, size_tolerance=1.05, p_value=0.05)
    found = []
    for c in report["cases"]:
        if c["backend"] != "iree" or not c.get("timing") or c["sku"] != "cpu-host":
            continue
        base = c["timing"]["median_ms"] / 1.3
        ref = verdict.GoldenRef("g", base, (base,) * 4,
                                run_medians_ms=(base * 0.99, base, base * 1.01, base * 1.02))
        d = Drift("cpu iree", 1.3, 0.01, 8)
        g = verdict.judge(c, ref, s, d)
        assert g.get("drift") is None
        found.append(g["verdict"])
    assert found and set(found) == {Verdict.REGRESSION}


def test_accept_config_from_another_directory_keeps_the_other_verdicts(tmp_path,
                                                                        monkeypatch):
    monkeypatch.chdir(DATA)        # a suite's goldens.dir is relative to its directory
    report = gate.rejudge(read_report("default-7.report.json"), Path("goldens"), settings())
    assert report["cases"][0]["golden"]["source"] == "goldens/cpu-generic-sync.json"
    monkeypatch.chdir(tmp_path)
    again = gate.rejudge_config_differs(report, settings())
    assert [c["golden"] for c in again["cases"]] == [c["golden"] for c in report["cases"]]


def test_the_reports_regression_text_names_the_level():
    from workflow.render.common import regression_text

    case = next(c for c in gate.rejudge(one_slower(1.5), DATA / "goldens", settings())["cases"]
                if c["id"] == BERT)
    assert " of its run's level ×1.1" in regression_text(case)


def test_accept_config_refuses_a_golden_it_cannot_find_rather_than_pass_unjudged(
        tmp_path, monkeypatch):
    from workflow.errors import ConfigError

    monkeypatch.chdir(DATA)
    report = gate.rejudge(read_report("default-7.report.json"), Path("goldens"), settings())
    cid = "cpu-host/iree/bert-tiny-1x32-f32/baseline"
    for c in report["cases"]:
        if c["id"] == cid:   # as if measured at 1 thread against a golden at 2
            c["golden"] = {**c["golden"], "verdict": Verdict.INCONCLUSIVE,
                           "config_differs": [{"key": "threads", "measured": 1, "golden": 2}]}
    here = gate.rejudge_config_differs(report, settings())
    judged = next(c for c in here["cases"] if c["id"] == cid)["golden"]
    assert judged["source"] == "goldens/cpu-host.json" and not judged["config_differs"]
    assert judged["verdict"] in (Verdict.PASS, Verdict.INCONCLUSIVE) and judged["drift"]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        gate.rejudge_config_differs(report, settings())
    assert f"{cid}: its golden file goldens/cpu-host.json is not found from" in str(err.value)


def test_a_golden_file_is_read_once_per_content(tmp_path, monkeypatch):
    """Judging a report looks each case up in its SKU's file (twice, with the level):
    parsed and checked once per content, and a rewrite of the same size within one
    clock tick is read afresh."""
    import shutil

    from workflow.regression import goldens

    path = shutil.copy(DATA / "goldens" / "cpu-host.json", tmp_path / "cpu-host.json")
    reads = []
    real = goldens.read
    monkeypatch.setattr(goldens, "read", lambda p, sku=None: reads.append(p) or real(p, sku))
    for _ in range(3):
        first = goldens.lookup(BERT, path)
    assert len(reads) == 1
    text = Path(path).read_text()
    old = f"{first.median_ms!r}"
    new = old[:-1] + ("1" if old[-1] != "1" else "2")   # same size, another value
    Path(path).write_text(text.replace(old, new, 1))
    assert goldens.lookup(BERT, path).median_ms == float(new) and len(reads) == 2
