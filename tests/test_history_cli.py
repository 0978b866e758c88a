"""`benchflow history` as a user runs it (issue 26, "Done when"): ten nightly reports of
one suite ingested in time order, one case 1.3x slower from the sixth on; `detect` names
that case and the sixth run and flags no other series; a report ingested twice adds
nothing; `show` lists the series with its commits; `html` writes the page.

The ten reports are made from one real report (tests/data/report_iree.json, schema 1.0:
an earlier version, which the importer must read) by giving every run its own night, its
own commit and fresh noise: each case's invocation medians scaled by a run-level factor
(1 % spread, the run-to-run spread of the default suite on this machine is about that)
and an invocation-level one (0.5 %). The commands run in-process (main()), the store is
a real embedded ClickHouse in tmp."""

from __future__ import annotations

import copy
import json
import statistics
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from workflow.cli.main import main
from workflow.render import dashboard

SOURCE = "tests/data/report_iree.json"
SLOW = "host/iree/linear-64x128x64-f32/baseline"
LATENCY = "latency median (ms)"


def nightly_reports(tmp_path, n=10, slow_from=5, factor=1.3, seed=7):
    """n reports, night i at 02:00 UTC, commit sha_i; SLOW is `factor` slower from run
    index `slow_from` (the sixth run) on."""
    base = json.loads(open(SOURCE).read())
    rng = np.random.default_rng(seed)
    start = datetime(2026, 10, 1, 2, 0, tzinfo=UTC)
    paths, shas = [], []
    for i in range(n):
        report = copy.deepcopy(base)
        when = start + timedelta(days=i)
        sha = f"{i + 1:02d}" + "ab12cd34ef56" * 3 + "ab"
        report["provenance"]["started_at"] = when.isoformat()
        report["provenance"]["finished_at"] = (when + timedelta(minutes=5)).isoformat()
        report["generated_at"] = (when + timedelta(minutes=5)).isoformat()
        for case in report["cases"]:  # measured that night (history keys on it)
            case["provenance"]["started_at"] = when.isoformat()
        report["provenance"]["git_sha"] = sha
        for case in report["cases"]:
            timing = case.get("timing")
            if case["status"] != "ok" or not timing:
                continue
            run_level = rng.lognormal(0.0, 0.01) * (factor if case["id"] == SLOW
                                                     and i >= slow_from else 1.0)
            values = [v * run_level * rng.lognormal(0.0, 0.005)
                      for v in timing["invocation_medians_ms"]]
            timing["invocation_medians_ms"] = values
            timing["median_ms"] = statistics.median(values)
            timing["min_ms"] = min(values)
        path = tmp_path / f"night{i + 1:02d}" / "report.json"
        path.parent.mkdir()
        path.write_text(json.dumps(report))
        paths.append(path)
        shas.append(sha)
    return paths, shas


def history(capsys, *args) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["history", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    return nightly_reports(tmp_path_factory.mktemp("nights"))


@pytest.mark.slow
def test_ten_nights_detect_names_the_slow_case_and_the_sixth_run(tmp_path, capsys, nights):
    paths, shas = nights
    store = str(tmp_path / "store")
    for path in paths:  # one ingest per night, in time order, as a nightly job does
        code, out = history(capsys, "ingest", str(path), "--store", store)
        assert code == 0 and "1 run(s) ingested" in out, out

    code, out = history(capsys, "detect", "--store", store, "--format", "json")
    data = json.loads(out)
    assert code == 1 and data["outcome"] == "regressed", out
    flagged = {s["series"]: s for s in data["series"] if s["change_points"]}
    assert list(flagged) == [f"{SLOW} :: {LATENCY}"], flagged
    (cp,) = flagged[f"{SLOW} :: {LATENCY}"]["change_points"]
    assert cp["index"] == 5 and cp["head_sha"] == shas[5] and cp["kind"] == "regression"
    assert cp["ratio"] == pytest.approx(1.3, rel=0.05)

    code, out = history(capsys, "detect", "--store", store)
    regressed = [line for line in out.splitlines() if line.startswith("REGRESSED")]
    assert code == 1 and len(regressed) == 1, out
    assert SLOW in regressed[0] and cp["run_id"] in regressed[0], regressed
    assert shas[5][:8] in regressed[0], regressed

    # Judged only from the run after the step on: nothing regressed there, and the two
    # newest runs cannot be judged yet (a change needs 3 runs after it): exit 3, never
    # the 0 of "ok".
    code, out = history(capsys, "detect", "--store", store, "--since", shas[6][:10])
    assert code == 3, out
    assert out.splitlines()[-1].startswith("COULD NOT JUDGE: the newest run ")
    assert "0 regression(s) and 0 improvement(s) since" in out


@pytest.mark.slow
def test_detect_says_which_newest_runs_it_could_not_judge(tmp_path, capsys, nights):
    """A change point needs min_side_runs (3) runs after it: the newest two runs are
    not judged yet, named, and the newest among them makes detect exit 3. A run with the
    5x slowdown as the newest is no "ok" (it was: `ok: 0 regression(s) ... in 8 series
    judged`)."""
    paths, shas = nights
    store = str(tmp_path / "store")
    code, out = history(capsys, "ingest", *map(str, paths[:5]), "--store", store)
    assert code == 0, out
    code, out = history(capsys, "detect", "--store", store, "--format", "json")
    data = json.loads(out)
    assert code == 3 and data["outcome"] == "could-not-judge", out
    newest = data["newest_run"]
    assert [r["head_sha"] for r in data["pending"]] == shas[3:5]
    assert data["pending"][-1]["run_id"] == newest and not data["newest_judged"]
    assert all(e["pending"] == [r["run_id"] for r in data["pending"]]
               for e in data["series"] if e["judged"])
    code, out = history(capsys, "detect", "--store", store)
    (line,) = [x for x in out.splitlines() if x.startswith("NOT JUDGED YET")]
    assert f"{newest} ({shas[4][:8]}, " in line and "the newest" in line
    assert "a change point needs 3 runs after it" in line
    assert out.splitlines()[-1].startswith(f"COULD NOT JUDGE: the newest run {newest} is "
                                           "not judged yet")
    assert not any(x.startswith("ok:") for x in out.splitlines())


@pytest.mark.slow
def test_a_report_ingested_twice_adds_nothing(tmp_path, capsys, nights):
    paths, _ = nights
    store = str(tmp_path / "store")
    code, out = history(capsys, "ingest", *map(str, paths[:3]), "--store", store)
    assert code == 0 and "3 run(s) ingested" in out, out
    code, before = history(capsys, "show", "--store", store, "--format", "json")
    # The same content under another name, and the same file again: one run each.
    copy_path = tmp_path / "renamed.json"
    copy_path.write_bytes(paths[1].read_bytes())
    code, out = history(capsys, "ingest", str(paths[2]), str(copy_path), "--store", store)
    assert code == 0 and "0 run(s) ingested" in out and out.count("already in the history") == 2
    code, after = history(capsys, "show", "--store", store, "--format", "json")
    assert json.loads(after) == json.loads(before)
    assert len(json.loads(after)) == 3


@pytest.mark.slow
def test_a_reports_dashboard_json_is_the_same_measurements(tmp_path, capsys, nights):
    """results/dashboard.json holds the report's numbers again: ingested after the report
    (no --timestamp needed: its rows say when they were measured), it adds nothing."""
    paths, _ = nights
    store = str(tmp_path / "store")
    # As in results/: the measured peak beside the report, whose percent-of-peak figures
    # dashboard.json carries.
    report, peak = tmp_path / "report.json", {"gflops": 100.0, "dtype": "f32"}
    report.write_bytes(paths[0].read_bytes())
    (tmp_path / "peak.json").write_text(json.dumps(peak))
    code, out = history(capsys, "ingest", str(report), "--store", store)
    assert code == 0 and "1 run(s) ingested" in out, out
    code, before = history(capsys, "show", "--store", store, "--format", "json")
    dash = tmp_path / "dashboard.json"
    records = dashboard.records(json.loads(report.read_text()), peak)
    assert any(r["metric"]["name"] == "percent of peak (%)" for r in records)
    dash.write_text(json.dumps(records))
    code, out = history(capsys, "ingest", str(dash), "--store", store)
    assert code == 0 and "0 run(s) ingested" in out and "already in the history" in out, out
    code, after = history(capsys, "show", "--store", store, "--format", "json")
    assert json.loads(after) == json.loads(before)


@pytest.mark.slow
def test_show_lists_the_series_with_its_commits(tmp_path, capsys, nights):
    paths, shas = nights
    store = str(tmp_path / "store")
    history(capsys, "ingest", *map(str, paths), "--store", store)
    code, out = history(capsys, "show", SLOW, "--store", store)
    assert code == 0 and f"{SLOW} :: {LATENCY}  (10 runs, lower is better)" in out, out
    assert all(sha[:8] in out for sha in shas)
    code, out = history(capsys, "show", "host/iree/linear-*", "--store", store,
                        "--format", "json")
    series = json.loads(out)
    assert code == 0 and {s["case_id"] for s in series} >= {SLOW}
    assert all(s["case_id"].startswith("host/iree/linear-") for s in series)
    assert all(len(s["points"]) == 10 for s in series)
    code, out = history(capsys, "show", "no/such/case", "--store", store)
    assert code == 1 and "no series matches" in out


@pytest.mark.slow
def test_html_marks_the_change_point(tmp_path, capsys, nights):
    from workflow.render.history import anchor

    paths, shas = nights
    store = str(tmp_path / "store")
    history(capsys, "ingest", *map(str, paths), "--store", store)
    page = tmp_path / "history.html"
    code, out = history(capsys, "html", "--store", store, "-o", str(page))
    text = page.read_text()
    assert code == 0 and f'id="{anchor(SLOW, LATENCY)}"' in text
    assert shas[5][:8] in text


@pytest.mark.slow
def test_detect_without_a_store_or_with_too_few_runs(tmp_path, capsys, nights):
    paths, _ = nights
    code, out = history(capsys, "detect", "--store", str(tmp_path / "empty"))
    assert code == 2 and "no history store there" in out, out
    store = str(tmp_path / "store")
    history(capsys, "ingest", *map(str, paths[:2]), "--store", store)
    code, out = history(capsys, "detect", "--store", store)
    assert code == 3 and "NOT JUDGED" in out, out


@pytest.mark.slow
def test_detect_since_after_every_run_judged_nothing(tmp_path, capsys, nights):
    """Issue 47: a --since later than every run leaves nothing to judge: exit 3 (could
    not judge), never the 0 of "passed"."""
    paths, _ = nights
    store = str(tmp_path / "store")
    code, out = history(capsys, "ingest", *map(str, paths), "--store", store)
    assert code == 0 and "10 run(s) ingested" in out, out
    code, out = history(capsys, "detect", "--store", store, "--since", "2099-01-01")
    assert code == 3, out
    assert "0 series judged: no run at or after --since 2099-01-01 (the latest is run " in out
    code, out = history(capsys, "detect", "--store", store, "--since", "2099-01-01",
                        "--format", "json")
    assert code == 3 and json.loads(out)["outcome"] == "could-not-judge", out
    # A --since at the last run looks at it, and says it cannot judge it yet.
    code, out = history(capsys, "detect", "--store", store, "--since", "2026-10-10")
    assert code == 3 and "COULD NOT JUDGE: the newest run " in out, out


@pytest.mark.slow
def test_a_file_with_some_failed_runs_records_the_rest_and_exits_0(tmp_path, capsys):
    """A Forge list is a run per entry: one failed entry is nothing ingestible, the others
    are the night recorded (exit 0), which only a file with nothing at all is not (3)."""
    from tests.test_history_importers import _forge_list

    path, _ = _forge_list(tmp_path)
    assert main(["history", "ingest", str(path), "--store", str(tmp_path / "s")]) == 0
    out = capsys.readouterr()
    assert "2 run(s) ingested" in out.out and "nothing ingestible" in out.err


@pytest.mark.slow
def test_a_v3_null_value_is_a_non_finite_one_dropped_not_a_refusal(tmp_path, capsys):
    """ClickHouse's JSON output writes NaN and Inf as null: an exported v3 table's null
    is dropped as a non-finite value is, the rest of the row kept."""
    row = {"timestamp": 1_700_000_000, "benchmark": {"name": "b", "mode": "inference"},
           "model": {"name": "m"}, "runners": [{"name": "cpu", "cpu_count": 4}],
           "metric": {"name": "latency median (ms)", "benchmark_values": [None, 2.0]}}
    path = tmp_path / "v3.json"
    path.write_text(json.dumps([row]))
    assert main(["history", "ingest", str(path), "--store", str(tmp_path / "s")]) == 0
    assert "1 run(s) ingested, 1 row(s)" in capsys.readouterr().out
