"""The history keyed by measurement configuration (issue 43, "Verdicts that hold from one
run to the next"): a case's runs at two configurations (device, threads, invocation
kind, measurement settings: records/measurement_config) are two series, and the change
of configuration is never a change point; a history measured on a shared machine
(every run disturbed) is judged; a `detect` that judged nothing says why.

Ten nightly reports (tests/test_history_cli.nightly_reports: one real report, fresh
noise and a commit a night) ingested into a real embedded store, in-process."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.test_history_cli import LATENCY, SLOW, history, nightly_reports
from workflow.history import query
from workflow.history.store import open_store
from workflow.records.measurement_config import NOT_RECORDED
from workflow.render.history import anchor

# SLOW's configuration in the report, and the one reconfigured() gives it.
BEFORE = "device=local-task,threads=2"
AFTER = "device=local-sync,threads=1"


def reconfigured(paths, from_night: int, factor: float = 1.7) -> None:
    """From night `from_night` (0-based) on, every measured case runs at the other
    configuration (local-sync <-> local-task at 2 threads) and `factor` slower: the
    x1.7 of unchanged code at 1 thread against 2 on this machine."""
    for path in paths[from_night:]:
        report = json.loads(path.read_text())
        for case in report["cases"]:
            prov, timing = case.get("provenance") or {}, case.get("timing") or {}
            if case["status"] != "ok" or not timing.get("invocation_medians_ms"):
                continue
            sync = prov.get("iree_device") == "local-sync"
            prov["iree_device"] = "local-task" if sync else "local-sync"
            prov["task_topology_max_group_count"] = 2
            timing["invocation_medians_ms"] = [v * factor
                                               for v in timing["invocation_medians_ms"]]
            timing["median_ms"] *= factor
            timing["min_ms"] *= factor
        path.write_text(json.dumps(report))


@pytest.fixture(scope="module")
def switched(tmp_path_factory):
    """Ten nights, no real step (factor 1.0); the configuration changes at night 6."""
    tmp = tmp_path_factory.mktemp("switched")
    paths, shas = nightly_reports(tmp, factor=1.0)
    reconfigured(paths, 5)
    return paths, shas


@pytest.fixture
def store(tmp_path, capsys, switched):
    paths, _ = switched
    where = str(tmp_path / "store")
    code, out = history(capsys, "ingest", *map(str, paths), "--store", where)
    assert code == 0, out
    return where


@pytest.mark.slow
def test_a_configuration_change_is_a_new_series_not_a_change_point(store, capsys, switched):
    _, shas = switched
    code, out = history(capsys, "detect", "--store", store, "--format", "json")
    data = json.loads(out)
    # No change point; the newest runs cannot be one yet (history/detect._pending).
    assert code == 3 and data["outcome"] == "could-not-judge", out
    assert data["change_points"] == [] and not data["newest_judged"]
    slow = [e for e in data["series"] if e["case_id"] == SLOW]
    assert [(e["series"], e["runs"], e["judged"]) for e in slow] == [
        (f"{SLOW} :: {LATENCY} [{BEFORE}]", 5, True),
        (f"{SLOW} :: {LATENCY} [{AFTER}]", 5, True)]
    assert slow[0]["new_config"] is None
    assert slow[1]["new_config"]["head_sha"] == shas[5]
    assert slow[1]["new_config"]["previous"] == BEFORE

    code, out = history(capsys, "detect", "--store", store)
    lines = out.splitlines()
    assert code == 3 and not any(x.startswith(("REGRESSED", "IMPROVED")) for x in lines), out
    (new,) = [x for x in lines if x.startswith(f"NEW CONFIGURATION [{AFTER}]")]
    assert f"from run {slow[1]['new_config']['run_id']} ({shas[5][:8]}, " in new
    assert f"after [{BEFORE}]: " in new and "start anew there" in new
    assert "0 regression(s) and 0 improvement(s) in " in lines[-1]
    assert lines[-1].startswith("COULD NOT JUDGE: the newest run ")


@pytest.mark.slow
def test_show_and_the_page_name_each_configuration(store, capsys, tmp_path):
    code, out = history(capsys, "show", SLOW, "--store", store)
    assert code == 0
    assert f"{SLOW} :: {LATENCY} [{BEFORE}]  (5 runs, lower is better)" in out, out
    assert f"{SLOW} :: {LATENCY} [{AFTER}]  (5 runs, lower is better)" in out, out
    page = tmp_path / "history.html"
    code, out = history(capsys, "html", "--store", store, "-o", str(page))
    text = page.read_text()
    # The newest configuration keeps the anchor report.html links to; the older its own.
    assert code == 0 and f'id="{anchor(SLOW, LATENCY)}"' in text
    assert f'id="{anchor(SLOW, LATENCY, BEFORE)}"' in text
    assert f"after [{BEFORE}]: a series of its own" in text


@pytest.mark.slow
def test_a_single_configuration_keeps_its_plain_id(tmp_path, capsys, switched):
    paths, _ = switched
    where = str(tmp_path / "store")
    history(capsys, "ingest", *map(str, paths[:5]), "--store", where)
    code, out = history(capsys, "detect", "--store", where, "--format", "json")
    data = json.loads(out)
    assert code == 3 and all(e["config_label"] == "" and e["new_config"] is None
                             for e in data["series"])
    assert f"{SLOW} :: {LATENCY}" in {e["series"] for e in data["series"]}


@pytest.mark.slow
def test_rows_without_a_configuration_are_a_series_of_their_own(tmp_path, capsys, switched):
    """Rows ingested before the configuration was written (or a torchao CSV, a foreign
    v3 file) have none: the empty string, `configuration not recorded`."""
    from workflow.render import dashboard

    paths, _ = switched
    where = tmp_path / "store"
    old = []
    for path in paths[:5]:  # as dashboard.json was before the key
        rows = dashboard.records(json.loads(path.read_text()))
        for row in rows:
            row["benchmark"]["extra_info"].pop("measurement_config", None)
        dash = path.parent / "dashboard.json"
        dash.write_text(json.dumps(rows))
        old.append(str(dash))
    code, out = history(capsys, "ingest", *old, *map(str, paths[5:]), "--store", str(where))
    assert code == 0, out
    with open_store(where) as st:
        got = [s for s in query.series(st, SLOW) if s["case_id"] == SLOW]
    assert [(s["id"], len(s["points"])) for s in got] == [
        (f"{SLOW} :: {LATENCY} [{NOT_RECORDED}]", 5), (f"{SLOW} :: {LATENCY} [{AFTER}]", 5)]
    assert got[0]["config"] == "" and got[1]["new_config"]["previous"] == NOT_RECORDED


@pytest.mark.slow
def test_detect_that_judged_nothing_says_why(tmp_path, capsys, switched):
    paths, _ = switched
    where = str(tmp_path / "store")
    history(capsys, "ingest", *map(str, paths[3:7]), "--store", where)  # 2 + 2 runs
    code, out = history(capsys, "detect", "--store", where)
    last = out.strip().splitlines()[-1]
    n = sum(1 for x in out.splitlines() if x.startswith("NOT JUDGED"))
    assert code == 3, out
    assert last == (f"COULD NOT JUDGE: 0 series judged: {n} have fewer than 4 runs at one "
                    f"configuration ({n // 2} of them a new configuration)"), out
    assert f"NOT JUDGED {SLOW} {LATENCY} [{AFTER}]: 2 runs at this configuration, needs 4; " \
           "a new configuration since run " in out


@pytest.mark.slow
def test_a_shared_machine_history_is_judged(tmp_path, capsys):
    """Every run disturbed by outside load, as on a machine other work shares: judged
    (before: `NOT JUDGED ... needs 4 clean ones`, exit 3), the 1.3x case found at the
    sixth run, no other series flagged."""
    paths, shas = nightly_reports(tmp_path, seed=11)
    rng = np.random.default_rng(3)
    for path in paths:
        report = json.loads(path.read_text())
        for case in report["cases"]:
            timing = case.get("timing")
            if case["status"] == "ok" and timing:
                timing["disturbed"] = True
                # Wider: each invocation another 3 % apart.
                timing["invocation_medians_ms"] = [
                    v * float(rng.lognormal(0.0, 0.03))
                    for v in timing["invocation_medians_ms"]]
        path.write_text(json.dumps(report))
    where = str(tmp_path / "store")
    history(capsys, "ingest", *map(str, paths), "--store", where)
    code, out = history(capsys, "detect", "--store", where, "--format", "json")
    data = json.loads(out)
    assert all(e["judged"] and e["disturbed"] == e["runs"] for e in data["series"]), out
    flagged = [e["series"] for e in data["series"] if e["change_points"]]
    assert code == 1 and flagged == [f"{SLOW} :: {LATENCY}"], flagged
    (cp,) = data["change_points"]
    assert cp["index"] == 5 and cp["head_sha"] == shas[5]
    code, out = history(capsys, "detect", "--store", where)
    assert "runs disturbed by outside load" in out.splitlines()[0], out
