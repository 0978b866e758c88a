"""The live progress and the summary (issue 24): render/progress.py's events and lines on
real records, commands/progress.py reading what a finished job wrote, the logger plugin fed
Snakemake's log records, and `snakemake --logger benchflow` end to end.

tests/data/ab_row_iree.json is a real A/B row (host vs generic, linear 128x256x256, on the
2-core CI machine)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import re
import time

import pytest
from snakemake.logging import DefaultFormatter
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.tests import MockOutputSettings

import snakemake_logger_plugin_benchflow as plugin
from tests.conftest import DATA, FAST_MEASUREMENT, snakemake, write_suite
from tests.render_data import find, iree_report, torch_report, with_synthetic_verdicts
from workflow import paths
from workflow.commands import progress as stages
from workflow.planning.resources import runtime_min
from workflow.records.storage import write_json
from workflow.render import common
from workflow.render import progress as render

OK_ID = "host/iree/linear-16x32x32-f32/baseline"
FAILED_ID = "host/iree/histc_model-f32/baseline"


def ab_row() -> dict:
    return json.loads((DATA / "ab_row_iree.json").read_text())


def test_a_case_line_says_status_interval_and_verdict_as_the_report_does():
    case = find(iree_report(), OK_ID)
    event = render.case_event(case)
    assert event["status"] == "ok" and event["median_ms"] == case["timing"]["median_ms"]
    assert event["ci95_ms"] == case["timing"]["ci95_ms"] and event["noisy"] is True
    text = render.case_text(event)
    assert text.startswith("ok ") and OK_ID in text
    assert f"{common.interval_text(case)} ms  noisy" in text
    assert "golden: no-golden" in text and "—" not in text.split("golden:")[1]


def test_a_failed_case_line_gives_the_tools_error_on_one_line():
    case = find(iree_report(), FAILED_ID)
    event = render.case_event(case)
    assert event["status"] == "failed" and event["median_ms"] is None
    assert event["reason"] == common.error_summary(case["error"]) and "\n" not in event["reason"]
    assert " ms" not in render.case_text(event).split("—")[0]


def test_a_golden_regression_is_degraded_with_its_numbers():
    report = with_synthetic_verdicts(iree_report())
    regressed = next(c for c in report["cases"] if common.regressions(c) == ["time"])
    event = render.case_event(regressed)
    assert event["status"] == "degraded" and event["verdict"] == "regression"
    assert event["reason"].startswith("time regression: median") and "×1.300" in event["reason"]


def test_the_summary_lists_regressions_then_failures_and_counts_everything():
    report = with_synthetic_verdicts(iree_report())
    cases = report["cases"]
    summary = render.summary_event(cases, [ab_row()], failed_jobs=[], success=True,
                                   reports=["results/report.md"])
    assert summary["cases"] == len(cases) == sum(summary["by_status"].values())
    assert summary["by_status"]["failed"] == 2 and summary["regressions"] == 2
    statuses = [a["status"] for a in summary["attention"]]
    # Regressions (time, size) first, then the failures, then the accuracy loss.
    assert [common.regressions(find(report, a["id"])) != [] for a in summary["attention"]][:2] \
        == [True, True]
    assert statuses[2:4] == ["failed", "failed"] and statuses[4] == "degraded"
    assert summary["noisy"] == sorted(c["id"] for c in cases
                                      if c["status"] == "ok" and c["timing"]["noisy"])
    lines = render.summary_lines(summary)
    text = "\n".join(lines)
    assert f"finished: {len(cases)} cases" in text and "2 failed" in text
    assert "to look at (2 regressed, 2 failed):" in text
    assert lines.index(next(x for x in lines if FAILED_ID in x)) > lines.index(
        next(x for x in lines if "time regression" in x))
    assert "A/B: 1 rows, 1 regressed or failed" in text
    assert "reports: results/report.md" in text


def test_a_failed_run_names_its_failed_jobs_and_logs():
    summary = render.summary_event([], [], success=False, reports=[], failed_jobs=[
        {"rule": "iree_batch", "jobid": 3, "log": ["logs/iree/host/b0.log"]}])
    text = "\n".join(render.summary_lines(summary))
    assert "FAILED: 0 cases" in text
    assert "failed job: iree_batch (jobid 3): log logs/iree/host/b0.log" in text


def test_a_run_of_ab_pairs_only_counts_its_rows_not_zero_cases():
    """`benchflow ab` builds results/ab.json alone: its summary says what it measured,
    A/B rows, not `finished: 0 cases`."""
    row = ab_row()  # a regression
    same = {**row, "verdict": "no-difference"}  # SYNTHETIC: a second, quiet row
    lines = render.summary_lines(render.summary_event(
        [], [row, same], success=True, reports=[], failed_jobs=[]))
    assert lines[2] == "finished: 2 A/B rows, 1 regressed or failed"
    assert lines[3] == "  " + render.ab_text(render.ab_event(row))
    assert not any("0 cases" in line or line.startswith("A/B:") for line in lines)
    one = render.summary_lines(render.summary_event([], [same], success=False, reports=[],
                                                    failed_jobs=[]))
    assert one[2] == "FAILED: 1 A/B row, 0 regressed or failed"


def test_an_ab_line_has_the_ratio_its_interval_and_the_verdict():
    row = ab_row()
    text = render.ab_text(render.ab_event(row))
    assert text == (f"A/B host → generic  linear-128x256x256-f32  ×{row['ratio']:.3f} "
                    f"[{row['ci95'][0]:.3f}, {row['ci95'][1]:.3f}] at {row['level']:.1%}"
                    "  regression")
    failed = {**row, "verdict": "failed", "failed_stage": "compile",  # SYNTHETIC
              "error": "iree-compile exited 1\nerror: no target"}
    text = render.ab_text(render.ab_event(failed))
    assert "×" not in text and text.endswith("failed  — compile: iree-compile exited 1 "
                                             "error: no target")


def test_the_eta_sums_what_each_left_job_is_expected_to_take_and_says_from_what():
    left = {"iree_batch": {"jobs": 2, "seconds": 30.0, "basis": "plan"},
            "report": {"jobs": 1, "seconds": 2.0, "basis": "rule"},
            "render_html": {"jobs": 1, "seconds": None, "basis": ""},
            "measure_peak": {"jobs": 0, "seconds": 7.0, "basis": "rule"}}
    event = render.eta_event(4, 8, left)
    assert event["seconds"] == 62.0 and event["jobs_unestimated"] == 1
    assert event["basis"] == {"plan": 2, "rule": 1}
    assert render.eta_text(event) == (
        "ETA ~62 s (4 of 8 jobs done; 4 left, one after another: 2 from the planned "
        "runtime (earlier records of the same cases), 1 from this run's jobs of the same "
        "rule, 1 not estimated yet)")
    assert render.eta_text(render.eta_event(0, 8, {})).startswith("ETA: unknown yet")
    assert render.eta_text(render.eta_event(8, 8, {})) == "ETA: done (8 of 8 jobs done)"


def test_a_planned_runtime_gives_back_at_least_the_expected_seconds():
    """planned_seconds inverts planning/resources.py's runtime request (overhead and margin
    off): never less than what the request was sized for."""
    from workflow.planning.resources import ESTIMATE_MARGIN
    for expected in (5.0, 60.0, 600.0):
        planned = stages.planned_seconds(runtime_min(ESTIMATE_MARGIN * expected))
        assert expected <= planned < expected + 60 / ESTIMATE_MARGIN
    assert stages.planned_seconds(None) is None


def iree_batch_on_disk(root, cases: list[dict]) -> str:
    """An IREE batch job's output as batch_job writes it, and its case records."""
    listed = []
    for case in cases:
        path = f"results/cases/{case['id']}.json"
        write_json(root / path, case)
        listed.append({"id": case["id"], "case": path})
    write_json(root / "results/iree/host/b0.json", {"cases": listed})
    return "results/iree/host/b0.json"


def test_progress_reads_a_finished_batchs_records_and_estimates_the_rest(tmp_path):
    report = iree_report()
    cases = [find(report, OK_ID), find(report, FAILED_ID)]
    batch = iree_batch_on_disk(tmp_path, cases)
    p = stages.Progress(tmp_path)
    p.plan({"iree_batch": 3, "report": 1, "total": 4})
    p.job_info(1, "iree_batch", [batch], ["logs/iree/host/b0.log"], {"runtime": 3})
    assert p.progress(0, 4)[0]["basis"] == {"plan": 3}  # no job finished: the plan
    time.sleep(0.01)
    events = p.job_finished(1)
    assert [(e["id"], e["status"]) for e in events] == [(OK_ID, "ok"), (FAILED_ID, "failed")]
    # The batches left: the finished one's time; the report: no job of its kind (one that
    # measures nothing) has finished, so it is not priced like a batch.
    (eta,) = p.progress(1, 4)
    assert eta["basis"] == {"rule": 2} and eta["jobs_unestimated"] == 1
    assert "1 not estimated yet" in render.eta_text(eta)
    p.job_error(2, "iree_batch", ["logs/iree/generic/b0.log"])
    summary = p.summary(success=False)  # no report made: the cases seen
    assert summary["cases"] == 2 and summary["failed_jobs"][0]["rule"] == "iree_batch"
    assert summary["reports"] == []


def test_progress_reads_every_case_of_a_finished_torch_batch(tmp_path):
    """A torch batch holds a SKU's eager, compiled and recipe cases, each record under
    cases/{backend}/{workload}/{recipe}.json (paths.torch_case_record): every one is a
    case line (the default suite printed none of its torch cases before this test)."""
    cases = [c for c in torch_report()["cases"] if c["backend"].startswith("torch-")]
    batch = "results/torch/host/b0"
    for case in cases:
        write_json(tmp_path / paths.torch_case_record(batch, case), case)
    p = stages.Progress(tmp_path)
    p.job_info(1, "run_torch", [batch], ["logs/torch/host/b0.log"], {"runtime": 3})
    # Their lines wait for the report's verdicts (tests/test_progress_truth.py); a run
    # that makes no report gives them unjudged at its end.
    assert p.job_finished(1) == []
    events = p.unjudged()
    assert sorted(e["id"] for e in events) == sorted(c["id"] for c in cases)
    assert len({c["backend"] for c in cases}) > 1  # the layout's depth


def test_a_job_that_failed_once_and_then_finished_is_retried_not_failed(tmp_path):
    batch = iree_batch_on_disk(tmp_path, [find(iree_report(), OK_ID)])
    p = stages.Progress(tmp_path)
    p.job_info(4, "iree_batch", [batch], ["logs/b0.log"], {"runtime": 2})
    p.job_error(4, "iree_batch", ["logs/b0.log", ".snakemake/slurm_logs/7.log"])
    p.job_info(4, "iree_batch", [batch], ["logs/b0.log"], {"runtime": 4})  # attempt 2
    assert [e["id"] for e in p.job_finished(4)] == [OK_ID]
    summary = p.summary(success=True)
    assert summary["failed_jobs"] == [] and summary["retried_jobs"][0]["jobid"] == 4
    assert ("retried: iree_batch (jobid 4) failed once, then finished; the failed attempt's "
            "log: logs/b0.log, .snakemake/slurm_logs/7.log") in render.summary_lines(summary)


def handler(mode: str) -> plugin.LogHandler:
    h = plugin.LogHandler(common_settings=MockOutputSettings(),
                          settings=plugin.LogHandlerSettings(format=mode))
    # What Snakemake's LoggerManager gives a plugin without a formatter of its own.
    h.setFormatter(DefaultFormatter(quiet=None, show_failed_logs=True))
    return h


def record(event, msg="", level=logging.INFO, **extra) -> logging.LogRecord:
    rec = logging.LogRecord("snakemake", level, "x", 1, msg, (), None)
    rec.event = event
    rec.__dict__.update(extra)
    return rec


def feed(h: plugin.LogHandler, tmp_path) -> None:
    """What Snakemake logs for a run of one IREE batch job that finishes."""
    batch = iree_batch_on_disk(tmp_path, [find(iree_report(), OK_ID)])
    header = dict.fromkeys(("datetime", "workflow_id", "platform", "host", "user",
                            "snakemake_version", "python_version", "cmd", "snakefile_main",
                            "basedir", "rundir", "configfiles", "config_md5"), "x")
    with contextlib.chdir(tmp_path):  # Snakemake is in the work directory as it runs
        h.emit(record(LogEvent.WORKFLOW_STARTED, "Workflow has started!", cwd=str(tmp_path),
                      **header))
    h.emit(record(LogEvent.RUN_INFO, "Job stats: ...", stats={"iree_batch": 1, "total": 1}))
    h.emit(record(LogEvent.JOB_INFO, jobid=1, rule_name="iree_batch", rule_msg=None,
                  output=[batch], log=["logs/b0.log"], resources={"runtime": 2}, local=True,
                  is_checkpoint=False, input=[], benchmark=None, reason="missing output",
                  wildcards={"sku": "host"}, priority=0, threads=1, indent=False))
    h.emit(record(LogEvent.JOB_FINISHED, "Finished jobid: 1 (Rule: iree_batch)", job_id=1))
    h.emit(record(LogEvent.PROGRESS, None, done=1, total=1))
    h.close()


@pytest.mark.parametrize("mode", ["json", "quiet"])
def test_the_plugin_prints_json_events_or_only_the_summary_on_stdout(tmp_path, capsys, mode):
    feed(handler(mode), tmp_path)
    out, err = capsys.readouterr()
    assert err == ""  # Snakemake's info lines are not shown in these modes
    if mode == "json":
        events = [json.loads(line) for line in out.splitlines()]
        assert [e["event"] for e in events] == ["case", "eta", "summary"]
        assert events[0]["id"] == OK_ID and events[2]["by_status"]["ok"] == 1
    else:
        assert "benchflow summary" in out and "finished: 1 cases: 1 ok" in out
        assert OK_ID in out and "ETA" not in out  # the noisy list names it; no live line


def test_the_plugin_keeps_snakemakes_lines_and_adds_its_own_without_ansi_in_a_pipe(tmp_path,
                                                                                     monkeypatch):
    stream = io.StringIO()  # not a terminal
    monkeypatch.setattr("sys.stderr", stream)
    feed(handler("text"), tmp_path)
    out = stream.getvalue()
    assert "\x1b[" not in out
    assert "Job stats: ..." in out and "rule iree_batch:" in out
    assert "Finished jobid" not in out  # the ETA line says it
    assert re.search(rf"^ok +{re.escape(OK_ID)} ", out, re.M)
    assert "ETA: done (1 of 1 jobs done)" in out and "benchflow summary" in out


def test_a_bad_format_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="expected one of text, quiet, json"):
        handler("xml")


# End to end: one IREE case that is measured and one that fails to compile (histc), the
# FAST measurement settings; the whole `all` target (report files) in text mode, then the
# batch forced again in JSON mode.
def progress_suite() -> dict:
    return {"suite_name": "progress", "model_modules": [str(DATA / "extra_models.py")],
            "skus": {"host": {"iree": {"target_cpu": "host"},
                              "measurement": copy.deepcopy(FAST_MEASUREMENT)}},
            "workloads": [{"model": "linear", "shapes": [[16, 32, 32]]},
                          {"model": "histc_model"}]}


@pytest.mark.e2e
def test_the_plain_snakemake_command_prints_cases_eta_and_summary(tmp_path):
    """Issue 36: no `--logger` flag to remember. Snakemake reads the workflow profile
    next to the Snakefile (profiles/default/) by itself, and it picks benchflow's logger;
    `--logger-benchflow-format` still chooses the format."""
    from tests.shared_runs import an_earlier_runs_peak

    suite = write_suite(tmp_path / "suite.yaml", progress_suite())
    # The renders' peak as an earlier run left it: measure_peak (a job of every core for
    # seconds) prints no case line, and the lines are what is tested here.
    an_earlier_runs_peak(tmp_path)
    proc = snakemake(tmp_path, "--configfile", str(suite), "--", "all")
    out = proc.stdout + proc.stderr
    assert "Using workflow specific profile" in out
    assert "\x1b[" not in out and "Logging error" not in out  # a pipe: plain text
    live = out.split("benchflow summary")[0]
    # The interval only where the invocations give one at 95 % (3 here may not).
    assert re.search(rf"^ok +{re.escape(OK_ID)}  [0-9.e-]+( \[[0-9.e-]+, [0-9.e-]+\])? ms",
                     live, re.M), live
    # Where its time went (issue 34): the phases of its record's `cost`.
    assert re.search(rf"^ok +{re.escape(OK_ID)}  .*\(\d+ inv\., [a-z-]+\).*  took [0-9.]+ s",
                     live, re.M), live
    assert re.search(rf"^failed +{re.escape(FAILED_ID)}  golden: no-golden  took [0-9.]+ s"
                     r"[^—]*  — iree-compile exited with 1: error: failed to legalize", live,
                     re.M), live
    assert re.search(r"^ETA ~\S+ \S+ \(\d of \d+ jobs done; \d+ left, one after another: ",
                     live, re.M), live
    summary = out.split("benchflow summary")[1]
    assert "finished: 2 cases: 1 ok, 1 failed" in summary
    assert re.search(rf"^  failed +{re.escape(FAILED_ID)}  — ", summary, re.M)
    # Named from where the command was typed (pytest's directory, not above tmp_path).
    assert f"reports: {tmp_path}/results/report.md, {tmp_path}/results/report.html, " \
           f"{tmp_path}/results/report.csv, {tmp_path}/results/report.json" in summary

    proc = snakemake(tmp_path, "--configfile", str(suite), "--forcerun", "iree_batch",
                     "--logger-benchflow-format", "json",
                     "results/report.json")
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[-1] == "summary" and kinds.count("summary") == 1 and "eta" in kinds
    cases = {e["id"]: e for e in events if e["event"] == "case"}
    assert cases[OK_ID]["status"] == "ok" and cases[OK_ID]["median_ms"] > 0
    assert cases[FAILED_ID]["status"] == "failed"
    assert events[-1]["by_status"]["failed"] == 1 and events[-1]["success"] is True


def test_a_case_line_says_where_its_time_went():
    """Issue 34: the phases of a case's `cost` of a tenth of a second or more, in the order
    they ran; a torch case's warm-up and timed work, not the invocations around them."""
    torch_cost = {"worker_start_s": 1.46, "build_s": 0.001, "compile_s": 2.31,
                  "accuracy_s": 0.05, "profile_s": 0.4, "warmup_s": 1.0, "timed_s": 3.16,
                  "invocations_s": 4.46, "graph_s": 0.46, "total_s": 8.8}
    assert render.cost_text(torch_cost) == (
        "8.8 s: start 1.5, compile 2.3, profile 0.4, warm-up 1.0, timed 3.2, graph 0.5")
    iree_cost = {"export_s": 3.2, "compile_s": 0.6, "invocations_s": 11.6, "profile_s": 0.05,
                 "accuracy_s": 0.2, "total_s": 15.6}
    assert render.cost_text(iree_cost) == (
        "15.6 s: export 3.2, compile 0.6, accuracy 0.2, invocations 11.6")
    assert render.cost_text(None) == render.cost_text({}) == ""
    event = {"status": "ok", "id": "h/torch-eager/linear-f32/baseline", "median_ms": 0.2,
             "interval": "0.2 [0.19, 0.21]", "noisy": False, "verdict": None, "reason": "",
             "invocations": 7, "stop_reason": "width-reached", "cost": iree_cost}
    assert render.case_text(event).endswith(
        "0.2 [0.19, 0.21] ms  (7 inv., width-reached)  took 15.6 s: export 3.2, compile 0.6, "
        "accuracy 0.2, invocations 11.6")


# --- text from outside on a terminal; a reader that goes away (issue 37) ------------------
# A clear-screen and a window-title sequence, as a tool's error or a dispatch name may carry.
HOSTILE = "\x1b[2J\x1b]0;pwned\x07"


def hostile_case() -> dict:
    case = copy.deepcopy(find(iree_report(), FAILED_ID))
    case["id"] = f"host/iree/evil{HOSTILE}-f32/baseline"  # SYNTHETIC: escapes in the id
    case["error"] = f"iree-compile exited with 1: error: {HOSTILE}dispatch_0 failed"
    return case


def feed_case(h: plugin.LogHandler, tmp_path, case: dict) -> None:
    batch = iree_batch_on_disk(tmp_path, [case])
    with contextlib.chdir(tmp_path):
        h.emit(record(LogEvent.WORKFLOW_STARTED, "Workflow has started!", cwd=str(tmp_path)))
    h.emit(record(LogEvent.JOB_INFO, jobid=1, rule_name="iree_batch", output=[batch], log=[],
                  resources={}))
    h.emit(record(LogEvent.JOB_FINISHED, "Finished jobid: 1", job_id=1))
    h.emit(record(None, f"Error in rule iree_batch: {HOSTILE}", level=logging.ERROR))
    h.close()


@pytest.mark.parametrize("mode", ["text", "quiet"])
def test_control_characters_from_outside_are_shown_escaped(tmp_path, monkeypatch, capsys,
                                                           mode):
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    feed_case(handler(mode), tmp_path, hostile_case())
    out = capsys.readouterr().out + stream.getvalue()
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J\\x1b]0;pwned\\x07" in out
    assert "Error in rule iree_batch: \\x1b[2J" in out  # Snakemake's own message too
    if mode == "text":
        assert "evil\\x1b[2J\\x1b]0;pwned\\x07-f32" in out  # the case line's id and error
        assert "error: \\x1b[2J\\x1b]0;pwned\\x07dispatch_0 failed" in out


def test_the_json_events_keep_the_text_and_stay_valid_json(tmp_path, capsys):
    feed_case(handler("json"), tmp_path, hostile_case())
    out = capsys.readouterr().out
    assert "\x1b" not in out  # json.dumps writes \u001b
    case = json.loads(out.splitlines()[0])
    assert case["id"] == hostile_case()["id"] and HOSTILE in case["reason"]


# The plugin driven as Snakemake drives it, in a process whose stdout is a pipe the test
# closes after the first line: the events after it meet EPIPE.
FEED_AFTER_CLOSE = """
import sys
from snakemake.logging import DefaultFormatter
from snakemake_interface_logger_plugins.tests import MockOutputSettings
import snakemake_logger_plugin_benchflow as plugin
from tests.test_progress import record, LogEvent
settings = MockOutputSettings()
settings.stdout = True  # text mode: Snakemake's --stdout, our lines on stdout
h = plugin.LogHandler(common_settings=settings,
                      settings=plugin.LogHandlerSettings(format=sys.argv[1]))
h.setFormatter(DefaultFormatter(quiet=None, show_failed_logs=True))
h.emit(record(LogEvent.PROGRESS, None, done=0, total=50))
sys.stdout.flush()
sys.stdin.readline()  # the reader has closed its end
for done in range(1, 50):
    h.emit(record(LogEvent.PROGRESS, None, done=done, total=50))
h.close()
print("not shown", flush=True)
sys.stderr.write("ended\\n")
"""


@pytest.mark.tool
@pytest.mark.parametrize("mode", ["json", "text"])
def test_a_reader_that_goes_away_ends_the_output_quietly(mode):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", FEED_AFTER_CLOSE, mode],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=DATA.parent.parent)
    first = proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate("go\n", timeout=60)
    assert (json.loads(first)["event"] == "eta" if mode == "json"
            else first.startswith("ETA: unknown yet (0 of 50 jobs done")), first
    assert proc.returncode == 0 and err == "ended\n", err


TINY_SNAKEFILE = """
rule all:
    input: expand("out/{i}.txt", i=range(4))

rule one:
    output: "out/{i}.txt"
    shell: "sleep 0.3; touch {output}"
"""


@pytest.mark.e2e
def test_snakemake_json_progress_through_head_ends_quietly(tmp_path):
    """`snakemake ... --logger-benchflow-format json | head -1`: the first event, then no
    traceback when the next ones meet the closed pipe; the run goes on to its end."""
    import shlex
    import subprocess
    import sys

    (tmp_path / "Snakefile").write_text(TINY_SNAKEFILE)
    cmd = " ".join(shlex.quote(a) for a in [
        sys.executable, "-m", "snakemake", "-s", str(tmp_path / "Snakefile"), "--directory",
        str(tmp_path), "--cores", "1", "--logger", "benchflow", "--logger-benchflow-format",
        "json"])
    proc = subprocess.run(["bash", "-c", f"{cmd} 2>{tmp_path}/err | head -1; "
                                         'echo "rc=${PIPESTATUS[0]}"'],
                          capture_output=True, text=True, timeout=300)
    first, status = proc.stdout.splitlines()
    err = (tmp_path / "err").read_text()
    assert json.loads(first)["event"] == "eta" and status == "rc=0", (proc.stdout, err)
    assert "Traceback" not in err and "Logging error" not in err and "Broken" not in err, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"{i}.txt" for i in range(4)]
