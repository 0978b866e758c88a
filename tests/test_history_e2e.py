"""The `history` rule through Snakemake (issue 26): a suite with `history.ingest: true`
ingests its finished report into its store, writes results/history.html and
results/history.json, and report.html links each case to its series there. A report
rebuilt from the same (cached) case records adds nothing to the history: those numbers
were not measured again."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FAST_MEASUREMENT, snakemake, write_suite
from tests.shared_runs import an_earlier_runs_peak

pytestmark = pytest.mark.e2e

CASE = "sync/iree/linear-16x32x32-f32/baseline"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    wd = tmp_path_factory.mktemp("history")
    suite = {"suite_name": "hist",
             "skus": {"sync": {"iree": {"target_cpu": "generic", "device": "local-sync"},
                               "measurement": dict(FAST_MEASUREMENT)}},
             "workloads": [{"model": "linear", "shapes": [[16, 32, 32]]}],
             "history": {"ingest": True}}
    write_suite(wd / "suite.yaml", suite)
    an_earlier_runs_peak(wd)  # the history's input: not measured again by this run
    snakemake(wd, "results/history.html", "results/report.html",
              "--configfile", str(wd / "suite.yaml"))
    return wd


def test_the_rule_ingests_the_report_and_writes_the_page(workdir):
    from workflow.render.history import anchor

    summary = json.loads((workdir / "results" / "history.json").read_text())
    assert len(summary["ingested"]["ingested"]) == 1, summary
    assert (workdir / "history").is_dir()  # the suite's history.path, in its workdir
    page = (workdir / "results" / "history.html").read_text()
    assert f'id="{anchor(CASE, "latency median (ms)")}"' in page
    report_html = (workdir / "results" / "report.html").read_text()
    assert f'href="history.html#{anchor(CASE, "latency median (ms)")}"' in report_html


def test_all_includes_the_history_when_the_suite_asks(workdir):
    plan = snakemake(workdir, "-n", "--forcerun", "report", "all",
                     "--configfile", str(workdir / "suite.yaml"))
    assert "rule history:" in plan.stdout, plan.stdout


def test_a_report_rebuilt_from_cached_records_adds_nothing(workdir, capsys):
    snakemake(workdir, "--forcerun", "report", "results/history.html",
              "--configfile", str(workdir / "suite.yaml"))
    summary = json.loads((workdir / "results" / "history.json").read_text())
    assert summary["ingested"]["ingested"] == [] and len(summary["ingested"]["already"]) == 1
    from workflow.cli.main import main

    capsys.readouterr()
    assert main(["history", "show", CASE, "--store", str(workdir / "history"),
                 "--format", "json"]) == 0
    (series,) = json.loads(capsys.readouterr().out)
    assert len(series["points"]) == 1, series
