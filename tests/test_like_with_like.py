"""Issue 43, like with like: a case is judged across runs only against a golden measured
at the same measurement configuration (records/measurement_config.py). Rerunning
unchanged code at 1 torch thread against a golden blessed at 2 read as "REGRESSED x1.703";
now it could not be judged (exit 3), naming the key and both values, until the user
reblesses or accepts the key."""

from __future__ import annotations

import json

import pytest

from tests.test_goldens import BASE, make_case, make_report
from workflow.cli.main import main
from workflow.records import measurement_config
from workflow.records.storage import write_json

CID = "host/torch-eager/linear-f32/baseline"
SETTINGS = {"torch_warmup_calls": 10, "torch_warmup_s": 0.2, "torch_min_run_time_s": 0.2}


def torch_case(medians, threads: int, kind: str, settings=None) -> dict:
    c = make_case(CID, medians, provenance={"torch_threads": threads,
                                            "measurement": settings or SETTINGS})
    c["timing"]["invocation_kind"] = kind
    return c


def bless(tmp_path, case: dict) -> str:
    base = tmp_path / "base.json"
    write_json(base, make_report(case))
    gdir = tmp_path / "goldens"
    assert main(["bless", "--report", str(base), "--goldens", str(gdir), "--yes"]) == 0
    return str(gdir)


def check(tmp_path, case: dict, gdir: str, *extra: str) -> int:
    new = tmp_path / "new.json"
    write_json(new, make_report(case, sha="new222"))
    return main(["check", "--report", str(new), "--goldens", gdir, "--remeasure-budget", "0",
                 *extra])


def test_check_refuses_a_golden_measured_at_another_thread_count(tmp_path, capsys):
    gdir = bless(tmp_path, torch_case(BASE, threads=2, kind="block"))
    entry = json.loads((tmp_path / "goldens" / "host.json").read_text())["cases"][CID]
    assert entry["measurement_config"] == {"device": "cpu", "threads": 2,
                                           "invocation_kind": "block", **SETTINGS}
    capsys.readouterr()
    # Unchanged code, measured at one thread (forked invocations): x1.7 "slower".
    slower = [1.7 * x for x in BASE]
    assert check(tmp_path, torch_case(slower, threads=1, kind="fork"), gdir) == 3
    out = capsys.readouterr().out
    assert "REGRESSED" not in out
    assert (f"COULD NOT JUDGE {CID}: measurement configuration differs: measured at 1 "
            "thread(s), golden at 2; invocation_kind: measured fork, golden block") in out
    assert "--accept-config threads,invocation_kind" in out
    assert out.strip().splitlines()[-1].startswith("COULD NOT JUDGE: 0 of 1 case(s) regressed")
    # --allow-inconclusive lets noise through, not another measurement.
    assert check(tmp_path, torch_case(slower, threads=1, kind="fork"), gdir,
                 "--allow-inconclusive") == 3


def test_accepted_keys_are_judged_and_a_real_change_still_regresses(tmp_path, capsys):
    gdir = bless(tmp_path, torch_case(BASE, threads=2, kind="block"))
    same = torch_case(BASE, threads=1, kind="fork")
    assert check(tmp_path, same, gdir, "--accept-config", "threads,invocation_kind") == 0
    slower = torch_case([1.5 * x for x in BASE], threads=1, kind="fork")
    assert check(tmp_path, slower, gdir, "--accept-config", "threads,invocation_kind") == 1
    # Accepting only one of the two keys still leaves the other: could not judge.
    capsys.readouterr()
    assert check(tmp_path, same, gdir, "--accept-config", "threads") == 3
    assert "invocation_kind: measured fork, golden block" in capsys.readouterr().out


def test_the_same_configuration_is_judged_and_a_measurement_setting_is_a_key(tmp_path, capsys):
    gdir = bless(tmp_path, torch_case(BASE, threads=1, kind="fork"))
    assert check(tmp_path, torch_case(BASE, threads=1, kind="fork"), gdir) == 0
    assert check(tmp_path, torch_case([1.5 * x for x in BASE], 1, "fork"), gdir) == 1
    longer = {**SETTINGS, "torch_min_run_time_s": 0.5}
    capsys.readouterr()
    assert check(tmp_path, torch_case(BASE, 1, "fork", longer), gdir) == 3
    assert "torch_min_run_time_s: measured 0.5, golden 0.2" in capsys.readouterr().out


def test_a_golden_from_before_the_configuration_is_compared_on_what_it_kept(tmp_path,
                                                                             capsys):
    """A 1.1 golden has no measurement_config; its explain.provenance kept torch_threads."""
    gdir = bless(tmp_path, torch_case(BASE, threads=2, kind="block"))
    path = tmp_path / "goldens" / "host.json"
    data = json.loads(path.read_text())
    del data["cases"][CID]["measurement_config"]
    data["schema_version"] = "1.1"
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert check(tmp_path, torch_case(BASE, threads=1, kind="fork"), gdir) == 3
    out = capsys.readouterr().out
    assert "measured at 1 thread(s), golden at 2" in out
    assert "invocation_kind" not in out  # not recorded then: not compared


def test_an_unknown_key_is_bad_input(tmp_path, capsys):
    gdir = bless(tmp_path, torch_case(BASE, threads=2, kind="block"))
    with pytest.raises(SystemExit) as exc:
        check(tmp_path, torch_case(BASE, 2, "block"), gdir, "--accept-config", "thread")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown measurement configuration key(s) 'thread'" in err and "threads" in err


def test_iree_threads_are_the_task_topology_and_local_sync_is_one():
    task = make_case("host/iree/a-f32/baseline", BASE,
                     provenance={"iree_device": "local-task",
                                 "task_topology_max_group_count": 2})
    sync = make_case("host/iree/a-f32/baseline", BASE, provenance={"iree_device": "local-sync"})
    assert measurement_config.of_case(task) == {"device": "local-task", "threads": 2}
    assert measurement_config.differences(measurement_config.of_case(sync),
                                          measurement_config.of_case(task)) == [
        {"key": "device", "measured": "local-sync", "golden": "local-task"},
        {"key": "threads", "measured": 1, "golden": 2}]


def test_compare_leaves_out_a_case_measured_otherwise_and_says_why():
    from workflow.regression.compare import compare

    base = make_report(torch_case(BASE, threads=2, kind="block"))
    new = make_report(torch_case([1.7 * x for x in BASE], threads=1, kind="fork"))
    result = compare(base, new)
    assert result["compared"] == 0 and not result["sections"]["Regressed"]
    ((cid, why),) = result["unmatched"]
    assert cid == CID and why.startswith("measurement configuration differs: measured at 1 "
                                         "thread(s), base at 2")
    accepted = compare(base, new, accept_config=("threads", "invocation_kind"))
    assert [r.id for r in accepted["sections"]["Regressed"]] == [CID]


def test_bless_pools_only_runs_at_the_blessed_configuration(tmp_path, capsys):
    """Pooling two levels into one golden would make a rerun at either look changed."""
    earlier, newest = tmp_path / "earlier.json", tmp_path / "newest.json"
    write_json(earlier, make_report(torch_case([1.7 * x for x in BASE], 1, "fork")))
    write_json(newest, make_report(torch_case(BASE, 2, "block")))
    gdir = tmp_path / "goldens"
    assert main(["bless", "--report", str(earlier), str(newest), "--goldens", str(gdir),
                 "--yes"]) == 0
    out = capsys.readouterr().out
    assert (f"! {CID}: 1 earlier run(s) at another configuration not pooled (measured at 1 "
            "thread(s), this report at 2") in out
    entry = json.loads((gdir / "host.json").read_text())["cases"][CID]
    assert entry["runs"] == 1 and entry["invocation_medians_ms"] == list(BASE)
