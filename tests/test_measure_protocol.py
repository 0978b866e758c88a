"""The one invocation loop (workflow/measure/protocol.py) and the A/B schedule's retakes
(workflow/measure/pairs.py) on scripted runners: counts, noisy reruns, adaptive stops,
retakes of disturbed invocations and the `disturbed` flag."""

from __future__ import annotations

import itertools

from workflow.measure.pairs import interleave
from workflow.measure.protocol import Observation, measure, measure_one, timing_section
from workflow.stats.sequential import Plan

M = {"invocations": 6, "max_invocations": 6, "noisy_cv": 0.10, "rerun_noisy": True,
     "alpha": 0.05, "target_rel_width": 0.02, "budget_s": 600, "disturbed_share": 0.25,
     "max_retakes": 3}


def obs(value: float, share: float | None = 0.0) -> Observation:
    disturbed = share is not None and share > M["disturbed_share"]
    return Observation(value, None, {"outside_share": share, "steal_share": 0.0, "nivcsw": 0,
                                     "cpu_per_wall": 1.0, "load1": 0.0, "disturbed": disturbed,
                                     "reason": "load" if disturbed else None})


def scripted(values):
    it = iter(values)
    return lambda: next(it)


def test_a_fixed_count_is_that_many_invocations():
    member = measure_one(scripted([obs(1.0)] * 6), M)
    t = timing_section(member, M)
    assert t["invocations"] == 6 and t["stop_reason"] == "fixed" and t["noisy_reruns"] == 0
    assert t["disturbed"] is False and t["disturbance"]["retaken"] == 0


def test_a_noisy_member_is_measured_again_once():
    values = [obs(v) for v in [1.0, 2.0] * 6]
    t = timing_section(measure_one(scripted(values), M), M)
    assert t["invocations"] == 12 and t["noisy_reruns"] == 1


def test_disturbed_invocations_are_retaken_and_not_kept():
    values = [obs(1.0), obs(9.0, 0.7), obs(1.0), obs(9.0, 0.6), *[obs(1.0)] * 4]
    member = measure_one(scripted(values), M)
    t = timing_section(member, M)
    assert t["invocation_medians_ms"] == [1.0] * 6
    assert t["disturbed"] is False
    assert t["disturbance"]["retaken"] == 2 and t["disturbance"]["retaken_ms"] == [9.0, 9.0]


def test_a_member_that_stays_disturbed_is_flagged_with_its_reason():
    values = [obs(5.0, 0.8)] * 20
    t = timing_section(measure_one(scripted(values), M), M)
    # 3 retaken, then the 6 kept are disturbed too: the flag, never a plain ok.
    assert t["invocations"] == 6 and t["disturbance"]["retaken"] == 3
    assert t["disturbed"] is True
    assert "6 of 6 invocations" in t["disturbance"]["reason"]
    assert "80%" in t["disturbance"]["reason"]


def test_without_observations_of_load_nothing_is_flagged():
    t = timing_section(measure_one(scripted([Observation(1.0)] * 6), M), M)
    assert t["disturbed"] is False and t["disturbance"] is None


def test_a_batch_stops_each_member_on_its_own_and_keeps_failures():
    # A target the noisy member may still reach by max_invocations (not out of reach).
    m = {**M, "max_invocations": 24, "target_rel_width": 0.3}
    calls = []
    steady = itertools.cycle([1.0, 1.001, 1.002])
    noisy = itertools.cycle([1.0, 1.5])

    def run(ids):
        calls.append(list(ids))
        out = {}
        for i in ids:
            if i == "broken" and len(calls) == 2:
                out[i] = "worker crashed"
            elif i != "broken":
                out[i] = obs(next(steady) if i == "steady" else next(noisy))
            else:
                out[i] = obs(1.0)
        return out

    got = measure(run, ["steady", "noisy", "broken"], m)
    assert got["broken"].error == "worker crashed" and len(got["broken"].kept) == 1
    assert got["steady"].sampling["stop_reason"] == "width-reached"
    assert len(got["steady"].kept) == Plan(6, 24).first_look
    assert got["noisy"].sampling["stop_reason"] == "max-rounds" and len(got["noisy"].kept) == 24
    # Members still measuring are invoked together; decided ones drop out.
    assert calls[0] == ["steady", "noisy", "broken"] and calls[-1] == ["noisy"]


def test_a_b_rounds_with_a_disturbed_side_are_retaken():
    base = scripted([obs(1.0), obs(1.0, 0.9), *[obs(1.0)] * 200])
    new = scripted([obs(1.0)] * 202)
    out = interleave(base, new, Plan(min_rounds=6, max_rounds=48, target_rel_width=0.01),
                     budget_s=60, seed=1, max_retakes=5)
    assert len(out["retaken"]) == 1 and out["rounds"] == len(out["base_ms"])
    assert out["verdict"] == "no-difference"


def test_a_persistent_load_stops_the_retakes_early():
    # Every invocation disturbed: after three seen, most disturbed, the load is the
    # machine's state and retaking more would only meet it again.
    m = {**M, "max_retakes": 10}
    t = timing_section(measure_one(scripted([obs(5.0, 0.8)] * 20), m), m)
    assert t["disturbance"]["retaken"] == 3 and t["invocations"] == 6 and t["disturbed"]


def test_a_passing_load_is_retaken_as_often_as_allowed():
    # Disturbed now and then, never most of the time: each one retaken.
    values = [obs(1.0), obs(1.0), obs(1.0), obs(9.0, 0.7), obs(1.0), obs(9.0, 0.7),
              *[obs(1.0)] * 4]
    t = timing_section(measure_one(scripted(values), M), M)
    assert t["disturbance"]["retaken"] == 2 and not t["disturbed"]
