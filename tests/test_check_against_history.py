"""Issue 43, verdicts that hold from one run to the next: `benchflow check --against-history
N` judges each case of a report against the last N stored runs of the same case at the
same measurement configuration, pooled (regression/rolling.py), with check's verdict
rules, lines and exit codes.

The stores are real: reports made as tests/test_goldens.py makes them (an IREE case on
local-task, its thread count its task topology), each measured at its own time, ingested
by `benchflow history ingest` into an embedded ClickHouse in tmp. Five nightly runs
around 1.0 ms: each run's level within +-3 % (the spread between runs of unchanged code
here is 5-6 %) and its five invocations within +-2 % of it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.test_goldens import make_case, make_report
from workflow.cli.main import main
from workflow.records import measurement_config
from workflow.records.storage import write_json

CID = "host/iree/linear-f32/baseline"
START = datetime(2026, 10, 1, 2, 0, tzinfo=UTC)
LEVELS = (0.98, 1.01, 1.03, 0.99, 1.00)        # the five stored runs' levels
SPREAD = (1.00, 1.02, 0.98, 1.01, 0.99)        # invocations around a run's level


def config(threads: int) -> str:
    return f"device=local-task,threads={threads},invocation_kind=process"


def report(path, level: float, night: int, threads: int = 1, sha: str = "abc123"):
    """A report of CID measured at START + `night` days, its invocations at `level`."""
    when = (START + timedelta(days=night)).isoformat()
    case = make_case(CID, [level * s for s in SPREAD],
                     provenance={"iree_device": "local-task",
                                 "task_topology_max_group_count": threads})
    case["timing"].update(invocation_kind="process", measured_at=when)
    assert measurement_config.as_text(measurement_config.of_case(case)) == config(threads)
    doc = make_report(case, sha=sha)
    doc["provenance"]["started_at"] = doc["generated_at"] = when
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, doc)
    return path


def ingest(capsys, store, *paths, name: str | None = None) -> None:
    args = ["history", "ingest", *map(str, paths), "--store", str(store)]
    assert main(args + (["--name", name] if name else [])) == 0
    assert f"{len(paths)} run(s) ingested" in capsys.readouterr().out


def check(capsys, path, store, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["check", "--report", str(path), "--store", str(store),
                 "--remeasure-budget", "0", *extra])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    """A store of five nightly runs of CID at 1 thread, around 1.0 ms."""
    tmp = tmp_path_factory.mktemp("nights")
    paths = [report(tmp / f"night{i}" / "report.json", level, i)
             for i, level in enumerate(LEVELS)]
    store = tmp / "store"
    assert main(["history", "ingest", *map(str, paths), "--store", str(store)]) == 0
    return store


@pytest.mark.slow
def test_unchanged_code_passes_and_a_slower_run_regresses(tmp_path, capsys, nights):
    same = report(tmp_path / "same.json", 1.0, 6)
    code, out = check(capsys, same, nights, "--against-history", "5")
    assert code == 0, out
    last = out.strip().splitlines()[-1]
    assert last.startswith("ok: 0 of 1 case(s) regressed, 1 judged; time verdicts: 1 pass")
    assert f"against the last 5 stored run(s) of each case at its measurement configuration " \
           f"in {nights}" in last
    assert "REGRESSED" not in out and "FEWER RUNS" not in out

    slower = report(tmp_path / "slower.json", 1.5, 6)
    code, out = check(capsys, slower, nights, "--against-history", "5")
    assert code == 1, out
    assert f"REGRESSED {CID}: time regressed (time x1.5" in out
    # The golden the case was judged against is named: the five runs, pooled.
    assert (f"    against history: last 5 runs at {config(1)}: median 0.9999 ms of 25 invocation "
            "medians, runs from 2026-10-01T02:00:00Z to 2026-10-05T02:00:00Z") in out
    assert out.strip().splitlines()[-1].startswith("FAIL: 1 of 1 case(s) regressed")


def test_the_last_n_runs_are_the_baseline(tmp_path, capsys, nights):
    """--against-history 2: the two newest runs (nights 3 and 4, at 0.99 and 1.00), the
    report's level judged against their median alone."""
    slower = report(tmp_path / "slower.json", 1.5, 6)
    code, out = check(capsys, slower, nights, "--against-history", "2")
    assert code == 1, out
    assert (f"against history: last 2 runs at {config(1)}: median 0.995 ms of 10 invocation "
            "medians, runs from 2026-10-04T02:00:00Z to 2026-10-05T02:00:00Z") in out
    # x1.5 of that median, not of the five runs' 1.0.
    assert "time x1.508" in out, out


@pytest.mark.slow
def test_fewer_runs_than_asked_are_judged_and_say_how_many(tmp_path, capsys, nights):
    same = report(tmp_path / "same.json", 1.0, 6)
    code, out = check(capsys, same, nights, "--against-history", "10")
    assert code == 0, out
    assert (f"FEWER RUNS {CID}: time pass against history: last 5 runs at {config(1)} (5 of "
            "the 10 asked for: no more stored)") in out
    # Runs newer than the report are no baseline of it: a report measured between the
    # third and the fourth night has three.
    early = report(tmp_path / "early.json", 1.0, 2.5, sha="early")
    code, out = check(capsys, early, nights, "--against-history", "5")
    assert code == 0, out
    assert f"last 3 runs at {config(1)} (3 of the 5 asked for" in out
    assert "runs from 2026-10-01T02:00:00Z to 2026-10-03T02:00:00Z" in out


@pytest.mark.slow
def test_another_thread_count_is_not_judged_against_these_runs(tmp_path, capsys, nights):
    """History only at 1 thread; the report at 2 threads x1.7 "slower": not a regression,
    could not be judged, naming both configurations."""
    other = report(tmp_path / "threads2.json", 1.7, 6, threads=2)
    code, out = check(capsys, other, nights, "--against-history", "5")
    assert code == 3, out
    assert "REGRESSED" not in out
    assert (f"COULD NOT JUDGE {CID}: history: 0 stored runs at {config(2)}; 5 at {config(1)}; "
            "at least 2 runs at its own measurement configuration are needed") in out
    assert out.strip().splitlines()[-1].startswith(
        "COULD NOT JUDGE: 0 of 1 case(s) regressed, 1 could not be judged, 0 judged")
    # --allow-inconclusive lets noise through, not a missing baseline.
    code, out = check(capsys, other, nights, "--against-history", "5", "--allow-inconclusive")
    assert code == 3, out


@pytest.mark.slow
def test_the_report_already_ingested_is_not_its_own_baseline(tmp_path, capsys, nights):
    """`make report` ingests the report before a nightly check: its own run is left out,
    as are bisection steps. One earlier run and the report in the store: one run, too few;
    a second earlier run makes it judged."""
    store = tmp_path / "store"
    first = report(tmp_path / "n0" / "report.json", 1.0, 0)
    slower = report(tmp_path / "slower" / "report.json", 1.5, 6)
    ingest(capsys, store, first, slower)
    # Bisection steps measured today at the report's level: never a baseline.
    steps = [report(tmp_path / f"b{i}" / "report.json", 1.5, 3 + i * 0.1, sha=f"b{i}")
             for i in range(3)]
    ingest(capsys, store, *steps, name="benchflow bisect")
    code, out = check(capsys, slower, store, "--against-history", "5")
    assert code == 3, out
    assert (f"COULD NOT JUDGE {CID}: history: 1 stored run at {config(1)}; at least 2 runs "
            "at its own measurement configuration are needed to judge it (left out at its "
            "configuration: 1 holding this report's measurements, 3 bisection steps)") in out

    ingest(capsys, store, report(tmp_path / "n1" / "report.json", 1.02, 1))
    code, out = check(capsys, slower, store, "--against-history", "5")
    assert code == 1, out
    assert f"REGRESSED {CID}" in out and f"against history: last 2 runs at {config(1)}" in out


def test_bad_input_exits_2(tmp_path, capsys, nights):
    same = report(tmp_path / "same.json", 1.0, 6)
    code, out = check(capsys, same, nights, "--against-history", "5",
                      "--goldens", str(tmp_path))
    assert code == 2
    assert out.strip() == ("--against-history and --goldens are exclusive: judge against "
                           "the last N stored runs, or against a goldens directory")
    code, out = check(capsys, same, tmp_path / "no-store", "--against-history", "5")
    assert code == 2 and f"{tmp_path / 'no-store'}: no history store there" in out, out
    # The store options without --against-history would be ignored: refused instead.
    code, out = check(capsys, same, nights)
    assert code == 2 and "--store: name the history store" in out, out
    for n in ("0", "-1", "x"):
        with pytest.raises(SystemExit) as exc:
            check(capsys, same, nights, "--against-history", n)
        assert exc.value.code == 2
        assert "expected a whole number of runs, 1 or more" in capsys.readouterr().err


def test_a_failed_case_with_a_history_regresses_and_a_new_case_is_not_judged(tmp_path, capsys,
                                                                            nights):
    """A case that ran before and now fails is a regression, as against a golden with a
    time (its record says no invocation kind: the runs that agree on what it says are
    its history); a case the store has never seen could not be judged."""
    failed = make_case(CID, [1.0] * 5, status="failed",
                       provenance={"iree_device": "local-task",
                                   "task_topology_max_group_count": 1})
    new = make_case("host/iree/new-f32/baseline", [1.0] * 5,
                    provenance={"iree_device": "local-task",
                                "task_topology_max_group_count": 1})
    new["timing"]["invocation_kind"] = "process"
    doc = make_report(failed, new)
    doc["provenance"]["started_at"] = doc["generated_at"] = "2026-10-08T02:00:00+00:00"
    path = tmp_path / "failed.json"
    write_json(path, doc)
    code, out = check(capsys, path, nights, "--against-history", "5")
    assert code == 1, out
    assert (f"REGRESSED {CID}: time regressed (case failed at compile: the golden has a "
            "time)") in out
    assert ("COULD NOT JUDGE host/iree/new-f32/baseline: history: 0 stored runs at "
            f"{config(1)}; at least 2 runs") in out


@pytest.mark.slow
def test_disturbed_runs_are_used_and_counted(tmp_path, capsys):
    """On a machine other work shares every run is disturbed: such runs are the baseline
    too (their spread in the pool), and the line under a verdict counts them."""
    paths = []
    for i, level in enumerate(LEVELS[:3]):
        path = report(tmp_path / f"n{i}" / "report.json", level, i)
        doc = json.loads(path.read_text())
        doc["cases"][0]["timing"].update(disturbed=True)
        write_json(path, doc)
        paths.append(path)
    store = tmp_path / "store"
    ingest(capsys, store, *paths)
    code, out = check(capsys, report(tmp_path / "slow.json", 1.5, 6), store,
                      "--against-history", "5")
    assert code == 1, out
    assert "(3 disturbed by outside load)" in out
