"""The history store (issue 26): upstream's v3 table on embedded chdb, ingest once per
run, series out in order, quoting, run metadata, and the server path's statements.
In-process (chdb embedded): the fast tier."""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.history_server import ChdbServer
from workflow.errors import ConfigError
from workflow.history import ingest, query, runs, sql
from workflow.history import store as store_module
from workflow.history.store import open_store
from workflow.render import dashboard

DATA = Path(__file__).resolve().parent / "data"
META = {"repo": "o/r", "head_branch": "refs/heads/main", "head_sha": "a" * 40,
        "workflow_id": 7, "run_attempt": 1, "job_id": 0, "name": "benchflow"}


def report(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def make_run(rep: dict, timestamp: int, scale: float = 1.0, path: str = "r.json"):
    """A Run as the contract shapes it, built from a report's dashboard records."""
    rep = copy.deepcopy(rep)
    for case in rep["cases"]:
        timing = case.get("timing") or {}
        if timing.get("invocation_medians_ms"):
            timing["invocation_medians_ms"] = [v * scale for v in
                                               timing["invocation_medians_ms"]]
    rows = json.loads(json.dumps(dashboard.records(rep)))
    for row in rows:
        row["benchmark"]["extra_info"]["source"] = "benchflow-report"
    run_id = hashlib.sha256((json.dumps(rows, sort_keys=True) + str(timestamp))
                            .encode()).hexdigest()[:16]
    return SimpleNamespace(run_id=run_id, source="benchflow-report", path=path,
                           timestamp=timestamp, meta={}, rows=rows)


@pytest.fixture
def store(tmp_path):
    with open_store(tmp_path / "history", write=True, create=True) as s:
        yield s


def count(store) -> int:
    return store.rows(f"SELECT count() AS n FROM {sql.TABLE} FORMAT JSONEachRow")[0]["n"]


def test_table_is_upstreams_ddl(store):
    upstream = (Path(sql.__file__).parent.parent / "schemas" / "oss_ci_benchmark_v3.sql")
    text = upstream.read_text()
    made = sql.create_table()
    # Only the two local changes: the columns, ORDER BY and settings are upstream's.
    assert made.replace("CREATE TABLE IF NOT EXISTS", "CREATE TABLE").replace(
        "ENGINE = MergeTree\n", "ENGINE = MergeTree('/clickhouse/tables/{uuid}/{shard}', "
        "'{replica}')\n") == text
    names = re.findall(r"^ {4}`(\w+)`", text.split("ENGINE")[0], re.M)  # top level
    got = store.rows("SELECT name FROM system.columns WHERE database = 'benchmark' AND "
                     "table = 'oss_ci_benchmark_v3' FORMAT JSONEachRow")
    assert [r["name"] for r in got] == names
    assert "_meta" in names and "servicelab_trial_id" in names


@pytest.mark.parametrize("name", ["report_iree.json", "report_torch.json"])
@pytest.mark.slow
def test_dashboard_records_insert_unchanged(store, name):
    records = dashboard.render(report(name))
    store.insert([{"timestamp": 1, **META, **r} for r in records])
    back = store.rows("SELECT benchmark, model, inputs, dependencies, runners, metric "
                      f"FROM {sql.TABLE} FORMAT JSONEachRow")
    assert len(back) == len(records)
    key = json.dumps
    for got, want in zip(sorted(back, key=key), sorted(records, key=key), strict=True):
        # The column is Array(Float32): values come back rounded to float32.
        want = copy.deepcopy(want)
        want["metric"]["benchmark_values"] = [
            float(np.float32(v)) for v in want["metric"]["benchmark_values"]]
        want["metric"]["target_value"] = float(np.float32(want["metric"]["target_value"]))
        assert json.loads(json.dumps(got)) == json.loads(json.dumps(want)) or \
            _close(got, want)


def _close(got, want) -> bool:
    g, w = got["metric"], want["metric"]
    assert {k: v for k, v in got.items() if k != "metric"} == \
        {k: v for k, v in want.items() if k != "metric"}
    assert g["name"] == w["name"] and g["extra_info"] == w["extra_info"]
    assert np.allclose(g["benchmark_values"], w["benchmark_values"], rtol=1e-6)
    return True


def test_ingest_twice_adds_nothing(store):
    first = make_run(report("report_iree.json"), 1_700_000_000)
    again = make_run(report("report_iree.json"), 1_700_000_000, path="elsewhere.json")
    got = ingest.ingest(store, [first, again], META, env={})
    assert got["ingested"] == [first.run_id] and got["already"] == [first.run_id]
    assert got["rows"] == len(first.rows) == count(store)
    second = ingest.ingest(store, [first], META, env={})
    assert second == {"ingested": [], "already": [first.run_id], "empty": [], "rows": 0}
    assert count(store) == len(first.rows)
    listed = query.runs(store)
    assert [(r["run_id"], r["rows"], r["source"]) for r in listed] == \
        [(first.run_id, len(first.rows), "benchflow-report")]
    assert sorted(listed[0]) == ["head_branch", "head_sha", "host", "name", "repo",
                                 "rows", "run_id", "source", "time", "timestamp",
                                 "versions", "workflow_id"]


def test_ingest_rejects_a_row_outside_v3(store):
    bad = make_run(report("report_iree.json"), 5)
    bad.rows[3]["metric"]["benchmark_values"] = ["fast"]
    with pytest.raises(ConfigError, match=r"r\.json: rows\[3\]\.metric\.benchmark_values"):
        ingest.ingest(store, [bad], META, env={})
    bad.rows[3] = {**bad.rows[2], "own_key": 1}
    with pytest.raises(ConfigError, match="own_key: not a v3 record column"):
        ingest.ingest(store, [bad], META, env={})
    assert count(store) == 0


def test_series_points_in_time_order(store):
    rep = report("report_iree.json")
    stamps = [1_700_000_300, 1_700_000_100, 1_700_000_200]
    made = [make_run(rep, t, scale=s) for t, s in zip(stamps, (3.0, 1.0, 2.0), strict=True)]
    ingest.ingest(store, made, META, env={})
    case = next(c for c in rep["cases"] if c["status"] == "ok" and c.get("timing"))
    (got,) = query.series(store, case["id"])
    assert got["id"] == f"{case['id']} :: latency median (ms)"
    assert (got["unit"], got["direction"]) == ("ms", "lower")
    assert [p["timestamp"] for p in got["points"]] == sorted(stamps)
    base = case["timing"]["invocation_medians_ms"]
    for point, scale in zip(got["points"], (1.0, 2.0, 3.0), strict=True):
        assert np.allclose(point["values"], [v * scale for v in base], rtol=1e-6)
        assert point["value"] == pytest.approx(np.median(point["values"]))
        assert point["versions"]["iree"] == rep["provenance"]["versions"]["iree-base-compiler"]
        assert point["host"] == rep["provenance"]["host"]["name"]
        assert point["head_sha"] == "a" * 40 and point["time"].endswith("Z")
    every = query.series(store, "*", None)
    assert len(every) == len({(r["benchmark"]["extra_info"]["case_id"], r["metric"]["name"])
                              for r in made[0].rows})
    assert [s["id"] for s in every] == sorted(s["id"] for s in every)


NASTY = "host/it's a \\ [weird] case\n%_*?/baseline"


@pytest.mark.slow
def test_nasty_case_id_and_globs(store):
    rep = report("report_iree.json")
    run = make_run(rep, 10)
    old = run.rows[0]["benchmark"]["extra_info"]["case_id"]
    for row in run.rows:
        if row["benchmark"]["extra_info"]["case_id"] == old:
            row["benchmark"]["extra_info"] = {**row["benchmark"]["extra_info"],
                                              "case_id": NASTY}
    ingest.ingest(store, [run], META, env={})
    assert {s["case_id"] for s in query.series(store, NASTY, None)} == {NASTY}
    assert {s["case_id"] for s in query.series(store, "host/it's a \\ [[]w*", None)} \
        == {NASTY}
    injected = query.series(store, "x' OR 1=1 OR '' = '", None)
    assert injected == []
    ids = {r["benchmark"]["extra_info"]["case_id"] for r in run.rows}
    for pattern in ("host/*", "*/baseline", "generic/iree/linear-16x?28x32*",
                    "*[!e]", "host/iree/[a-l]*"):
        want = {i for i in ids if fnmatch.fnmatchcase(i, pattern)}
        got = {s["case_id"] for s in query.series(store, pattern, None)}
        assert got == want, pattern


GLOB_TEXTS = ("ab", "acb", "abc", "ax", "bx", "cx", "]x", "a[", "\\*.+", "\\a.+",
              "^$|(x)", "bz", "\\z", "a\nb", "", "xx", "a-b")


def test_glob_regex_is_fnmatch(store):
    """ClickHouse's match() (RE2) on the translated pattern agrees with fnmatchcase."""
    for pattern in ("a*b", "a?c", "[ab]x", "[!ab]x", "[]]x", "[!]]x", "a[", "\\*.+",
                    "^$|(x)", "[a-c\\]z", "a*", "*", "?", "a[-]b"):
        regex = sql.quote(sql.glob_regex(pattern))
        got = store.rows("SELECT " + ", ".join(
            f"match({sql.quote(t)}, {regex}) AS m{i}" for i, t in enumerate(GLOB_TEXTS))
            + " FORMAT JSONEachRow")[0]
        want = {f"m{i}": int(fnmatch.fnmatchcase(t, pattern))
                for i, t in enumerate(GLOB_TEXTS)}
        assert got == want, pattern


def test_quote_escapes(store):
    for text in ("it's", "a\\b", "x\ny\tz\0", "''\\'"):
        assert store.rows(f"SELECT {sql.quote(text)} AS t FORMAT JSONEachRow") == \
            [{"t": text}]


GITHUB = {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "o/r", "GITHUB_REF":
          "refs/heads/main", "GITHUB_SHA": "b" * 40, "GITHUB_RUN_ID": "123",
          "GITHUB_RUN_ATTEMPT": "2"}
GITLAB = {"GITLAB_CI": "true", "CI_PROJECT_PATH": "g/s/n", "CI_COMMIT_BRANCH": "dev",
          "CI_COMMIT_REF_NAME": "dev", "CI_COMMIT_SHA": "c" * 40, "CI_PIPELINE_ID": "55",
          "CI_JOB_ID": "66"}


def test_run_meta_from_ci_variables():
    assert runs.run_meta(GITHUB) == {
        "repo": "o/r", "head_branch": "refs/heads/main", "head_sha": "b" * 40,
        "workflow_id": 123, "run_attempt": 2, "job_id": 0, "name": "benchflow"}
    pr = runs.run_meta({**GITHUB, "GITHUB_HEAD_REF": "feature"})
    assert pr["head_branch"] == "feature"
    assert runs.run_meta(GITLAB) == {
        "repo": "g/s/n", "head_branch": "refs/heads/dev", "head_sha": "c" * 40,
        "workflow_id": 55, "run_attempt": 1, "job_id": 66, "name": "benchflow"}


def test_run_meta_order_and_git():
    asked = []

    def facts():
        asked.append(1)
        return {"sha": "d" * 40, "branch": "topic", "remote": "git@github.com:o/n.git"}

    assert runs.run_meta(GITHUB, git_facts=facts)["head_sha"] == "b" * 40 and not asked
    local = runs.run_meta({}, git_facts=facts)
    assert (local["repo"], local["head_branch"], local["head_sha"]) == \
        ("o/n", "refs/heads/topic", "d" * 40) and local["workflow_id"] == 0
    # The file's own commit (what was measured) beats git's HEAD now; overrides beat all.
    filed = runs.run_meta({}, {"head_sha": "e" * 40}, git_facts=facts)
    assert filed["head_sha"] == "e" * 40 and filed["repo"] == "o/n"
    over = runs.run_meta(GITHUB, {"head_sha": "e" * 40}, {"head_sha": "f" * 40,
                                                         "repo": "x/y"})
    assert (over["head_sha"], over["repo"]) == ("f" * 40, "x/y")
    for url, name in (("https://github.com/o/n", "o/n"), ("ssh://git@h:22/g/s/n.git",
                                                         "g/s/n"), ("git@h:o/n.git", "o/n")):
        assert runs.repo_name(url) == name
    with pytest.raises(ConfigError, match="workflow_id: 'abc' is not a whole number"):
        runs.run_meta({**GITHUB, "GITHUB_RUN_ID": "abc"})


def test_one_embedded_store_per_process(tmp_path, store):
    with open_store(Path(store.where), write=True) as same:  # the same directory: shared
        assert count(same) == 0
    assert count(store) == 0  # still open after the other handle closed
    with pytest.raises(ConfigError, match="another store .* is open in this process"):
        open_store(tmp_path / "other", write=True, create=True)


def _session(store) -> tuple[list, list, list]:
    made = [make_run(report("report_torch.json"), t, scale=s)
            for t, s in ((200, 1.0), (100, 1.5))]
    ingest.ingest(store, made, META, env={})
    ingest.ingest(store, made[:1], META, env={})
    return query.series(store, "*", None), query.runs(store), list(store.statements)


@pytest.mark.slow
def test_server_path_sends_the_same_statements(tmp_path):
    """The server path end to end: clickhouse-connect against tests/history_server.py
    (ClickHouse's HTTP interface answered by chdb in a thread): same results, and the
    server received exactly the statements the embedded path ran, in order."""
    with open_store(tmp_path / "embedded", write=True, create=True) as embedded:
        want = _session(embedded)
    server = ChdbServer(tmp_path / "server")
    with server as url, open_store(url=url) as remote:
        assert remote.where.endswith("@127.0.0.1:" + url.rsplit(":", 1)[1]) and \
            ":***@" in remote.where
        got = _session(remote)
    assert got == want
    sent = [s.strip() for s in want[2]]
    # Less what clickhouse-connect asks on its own when it connects (version, settings).
    assert [s for s in server.received if s in sent] == sent


def test_projections_answer_series_and_runs(store):
    """The projections the speed rests on are the ones ClickHouse picks (a change to
    the query text that stops it matching them would only show as slowness)."""
    rep = report("report_iree.json")
    ingest.ingest(store, [make_run(rep, t) for t in (1, 2, 3)], META, env={})
    case = next(c["id"] for c in rep["cases"] if c["status"] == "ok" and c.get("timing"))
    for statement in (sql.series(case, sql.LATENCY), sql.runs()):
        forced = statement.replace("SETTINGS ", "SETTINGS force_optimize_projection = 1, "
                                   "optimize_use_projections = 1, ")
        assert store.rows(forced) == store.rows(statement)
    listed = query.runs(store)
    assert [(r["rows"], r["host"]) for r in listed] == \
        [(len(make_run(rep, 1).rows), rep["provenance"]["host"]["name"])] * 3


def test_grouped_rows_come_back_as_the_rows(store):
    """A run's rows, sent grouped by case (store.grouped_lines, unfolded by ARRAY JOIN),
    read back equal to the rows given, row for row (Float32 values as the table keeps
    them)."""
    from workflow.history.importers import read_runs

    (run,) = read_runs(DATA / "report_torch.json")
    rows = ingest.full_rows(run, META)
    groups = store_module.grouped_lines(rows)
    assert len(groups) == 1 and groups[0][1].count(b"\n") + 1 < len(rows)
    store.insert(rows)
    back = store.rows(f"SELECT timestamp, benchmark, model, inputs, dependencies, runners, "
                      f"metric FROM {sql.TABLE} FORMAT JSONEachRow")
    key = lambda r: r["metric"]["extra_info"]["measurement_id"]  # noqa: E731
    assert sorted(map(key, back)) == sorted(map(key, rows))
    given = {key(r): r for r in rows}
    for row in back:
        want = given[key(row)]
        assert row["benchmark"] == want["benchmark"] and row["model"] == want["model"]
        assert row["timestamp"] == want["timestamp"]
        assert row["metric"]["benchmark_values"] == pytest.approx(
            want["metric"]["benchmark_values"], rel=1e-6)


@pytest.mark.slow
def test_a_stored_millisecond_run_is_named_skipped_and_removable(tmp_path, capsys):
    """A run stored before the importers checked values (here a millisecond epoch, put
    in through ingest directly): show, detect and html go on without it, each naming
    it in one line with `history remove`, which then removes it."""
    from workflow.cli.main import main

    where = tmp_path / "history"
    good = [make_run(report("report_iree.json"), t) for t in (1_700_000_000, 1_700_000_100)]
    bad = make_run(report("report_iree.json"), 1_764_000_000_123, scale=2.0)
    for row in bad.rows:
        row["timestamp"] = bad.timestamp
    with open_store(where, write=True, create=True) as st:
        ingest.ingest(st, [*good, bad], META, env={})
    for argv in (["show"], ["show", "*"], ["detect"], ["html", "-o", str(tmp_path / "h.html")]):
        capsys.readouterr()
        main(["history", *argv, "--store", str(where)])
        err = capsys.readouterr().err
        assert f"run {bad.run_id}: its timestamp 1764000000123 looks like milliseconds" in err
        assert f"`benchflow history remove {bad.run_id}`" in err and "Traceback" not in err
    assert main(["history", "remove", bad.run_id, "--store", str(where)]) == 0
    capsys.readouterr()
    assert main(["history", "show", "--store", str(where), "--format", "json"]) == 0
    out = capsys.readouterr()
    assert out.err == "" and [r["run_id"] for r in json.loads(out.out)] == \
        [g.run_id for g in good]


def test_a_legacy_store_opens_and_gets_its_marker(tmp_path):
    """A store made before the marker (chdb's layout with benchflow's table) is read as
    it is, and is marked at its next write."""
    from workflow.history import layout

    where = tmp_path / "history"
    with open_store(where, write=True, create=True) as st:
        ingest.ingest(st, [make_run(report("report_iree.json"), 1_700_000_000)], META, env={})
    (where / layout.MARKER).unlink()
    with open_store(where) as st:  # to read
        assert count(st) == 84
    assert not (where / layout.MARKER).exists()
    with open_store(where, write=True):
        pass
    assert json.loads((where / layout.MARKER).read_text())["rows"] == 84


# A stand-in for chdb whose engine load is interrupted by Ctrl-C, and which answers as
# chdb's __init__ does when the load fails: `ImportError: chdb-core engine not found`.
INTERRUPTED_CHDB = '''\
import os
import signal

try:
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the engine loads
    sum(range(100_000))  # the load goes on: where Python delivers the interrupt
except BaseException:
    raise ImportError("chdb-core engine not found. Install it with: pip install chdb-core")
'''


def test_ctrl_c_while_chdb_loads_is_an_interrupt_not_a_broken_install(tmp_path, monkeypatch):
    from workflow.history import engine

    (tmp_path / "chdb").mkdir()
    (tmp_path / "chdb" / "__init__.py").write_text(INTERRUPTED_CHDB)
    (tmp_path / "chdb" / "session.py").write_text("Session = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("chdb", "chdb.session"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(KeyboardInterrupt):
        engine.session(tmp_path / "store", tmp_path / "store", fresh=True)
