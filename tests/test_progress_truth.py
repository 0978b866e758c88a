"""The terminal tells the truth (issue 45): what the progress lines and the summary say
match the suite's own results and the report, whichever directory the suite works in,
however the run ends (Ctrl-C, a full disk) and whatever the terminal is (NO_COLOR,
COLUMNS=0, a 0x0 pty).

tests/data/report_torch.json is a real report (IREE, torch-eager and torch-inductor on
one SKU, baseline and int8wo: its IREE int8wo cases are unsupported, decided while the
suite was planned); report_iree.json another suite's real report (14 cases)."""

from __future__ import annotations

import copy
import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import DATA, FAST_MEASUREMENT, REPO, write_suite
from tests.render_data import find, iree_report, torch_report
from tests.shared_runs import an_earlier_runs_peak
from tests.test_progress import TINY_SNAKEFILE, ab_row, iree_batch_on_disk
from workflow import paths
from workflow.commands import progress as stages
from workflow.commands.progress_text import DISTURBED_MEANS, summary_lines
from workflow.planning.suite_dir import MARKER_KIND, suite_identity
from workflow.records.storage import write_json
from workflow.render import progress as render

TORCH_ID = "host/torch-eager/linear-16x256x64-f32/baseline"
IREE_OK = "host/iree/linear-16x256x64-f32/baseline"
UNSUPPORTED = "host/iree/linear-16x256x64-f32/int8wo"


def torch_batch_on_disk(root: Path, cases: list[dict]) -> str:
    """A torch batch job's output directory (paths.torch_case_record) with `cases`."""
    batch = "results/torch/host/b0"
    for case in cases:
        write_json(root / paths.torch_case_record(batch, case), case)
    return batch


def finish(p: stages.Progress, jobid: int, rule: str, output: str) -> list[dict]:
    p.job_info(jobid, rule, [output], [], {})
    return p.job_finished(jobid)


def regressed_report() -> dict:
    """report_torch.json where the report step judged one torch case a 3.5x regression
    against a blessed golden (SYNTHETIC: the verdict the report holds after bless and a
    slowdown; the record the batch wrote carries none)."""
    report = torch_report()
    case = find(report, TORCH_ID)
    median = case["timing"]["median_ms"]
    case["golden"].update(verdict="regression", value_ms=median / 3.5, tolerance=1.1,
                          ratio=3.5, p_value=0.001)
    case["provenance"]["synthetic"] = "SYNTHETIC verdict for progress tests"
    return report


# --- item 2: a torch case's line has the report's golden verdict -------------------------

def test_a_torch_case_line_has_the_golden_verdict_the_report_holds(tmp_path):
    """Torch cases are judged against the goldens by the report step, not in their batch:
    their lines wait for it. The batch's line said `golden: no-golden` while the summary
    and `check` said regression."""
    torch_cases = [c for c in torch_report()["cases"] if c["backend"] == "torch-eager"]
    assert find(torch_report(), TORCH_ID)["golden"]["verdict"] == "no-golden"
    batch = torch_batch_on_disk(tmp_path, torch_cases)
    write_json(tmp_path / paths.REPORT, regressed_report())
    p = stages.Progress(tmp_path)
    assert finish(p, 1, "run_torch", batch) == []
    lines = {e["id"]: e for e in finish(p, 2, "report", paths.REPORT)}
    assert {c["id"] for c in torch_cases} <= set(lines)
    assert lines[TORCH_ID]["verdict"] == "regression"
    text = render.case_text(lines[TORCH_ID])
    assert text.startswith("degraded") and "golden: regression ×3.500" in text, text
    assert "time regression" in text
    # The summary and the line say the same.
    summary = p.summary(success=True)
    assert summary["regressions"] == 1 and summary["by_verdict"]["regression"] == 1


def test_torch_lines_of_a_run_that_makes_no_report_say_they_are_not_judged(tmp_path):
    case = find(torch_report(), TORCH_ID)
    p = stages.Progress(tmp_path)
    assert finish(p, 1, "run_torch", torch_batch_on_disk(tmp_path, [case])) == []
    (event,) = p.unjudged()
    assert event["id"] == TORCH_ID and event["verdict"] is None
    assert render.case_text(event).endswith("— " + stages.NOT_JUDGED)
    assert p.unjudged() == []  # said once


# --- item 7: a case decided while planning gets its line -----------------------------------

def test_every_case_decided_while_planning_gets_its_line_with_the_reason(tmp_path):
    """The IREE int8wo cases are unsupported when the suite is planned: no job measures
    them, the report holds them. Each gets its line (once) when the report is made."""
    report = torch_report()
    iree_ok = [c for c in report["cases"] if c["backend"] == "iree" and c["status"] == "ok"]
    batch = iree_batch_on_disk(tmp_path, iree_ok)
    write_json(tmp_path / paths.REPORT, report)
    p = stages.Progress(tmp_path)
    assert {e["id"] for e in finish(p, 1, "iree_batch", batch)} == {c["id"] for c in iree_ok}
    at_report = finish(p, 2, "report", paths.REPORT)
    planned = sorted(c["id"] for c in report["cases"] if c["status"] == "unsupported")
    assert sorted(e["id"] for e in at_report) == planned and len(planned) == 5
    line = render.case_text(next(e for e in at_report if e["id"] == UNSUPPORTED))
    reason = find(report, UNSUPPORTED)["error"]
    assert re.match(rf"unsupported +{re.escape(UNSUPPORTED)}  .*— ", line), line
    assert " ".join(reason.split()) in line
    summary = p.summary(success=True)
    assert summary["by_status"]["unsupported"] == len(planned)


# --- item 3: a disturbed run is said in the terminal -------------------------------------

def test_the_summary_counts_the_disturbed_cases_and_says_what_that_means(tmp_path):
    report = iree_report()
    timed = [c for c in report["cases"] if c["status"] == "ok"]
    for case in timed:  # SYNTHETIC: the whole run measured under outside load
        case["timing"]["disturbed"] = True
        case["timing"]["disturbance"] = {"reason": "other processes took 60% of the CPUs"}
    write_json(tmp_path / paths.REPORT, report)
    p = stages.Progress(tmp_path)
    finish(p, 1, "report", paths.REPORT)
    lines = summary_lines(p.summary(success=True))
    head = f"disturbed ({len(timed)} of {len(timed)} timed cases): {DISTURBED_MEANS}"
    assert head in lines, "\n".join(lines)
    assert "inconclusive, not a regression" in head and "wider spread" in head
    ids = lines[lines.index(head) + 1]
    assert ids == "  " + ", ".join(sorted(c["id"] for c in timed))
    # Beside the noisy cases, before the report files.
    assert lines.index(head) < next(i for i, x in enumerate(lines) if x.startswith("reports:"))


# --- item 5: Ctrl-C (the Progress side; the real one below) -------------------------------

def test_an_interrupted_summary_counts_what_was_measured_and_names_no_old_report(tmp_path):
    write_json(tmp_path / paths.REPORT, iree_report())  # an earlier run's, 14 cases
    write_json(tmp_path / paths.AB, {"pairs": [ab_row()]})  # and its A/B table
    ok = find(iree_report(), "host/iree/linear-16x32x32-f32/baseline")
    p = stages.Progress(tmp_path)
    p.plan({"iree_batch": 1, "run_torch": 1, "report": 1, "total": 3})
    finish(p, 1, "iree_batch", iree_batch_on_disk(tmp_path, [ok]))
    p.job_info(2, "run_torch", ["results/torch/host/b0"], ["logs/torch/host/b0.log"], {})
    p.interrupt()
    p.job_error(2, "run_torch", ["logs/torch/host/b0.log"])
    summary = p.summary(success=False)
    assert summary["cases"] == 1 and summary["failed_jobs"] == [] and summary["reports"] == []
    assert summary["ab"] == []  # the earlier run's rows are not this run's
    lines = summary_lines(summary)
    text = "\n".join(lines)
    assert ("interrupted: 1 case measured (1 of 2 measuring jobs finished); rerun to "
            "finish, finished cases are kept") in lines
    assert "before the interrupt: 1 cases: 1 ok" in lines and "FAILED" not in text
    assert lines[-1] == ("reports: none made by this run (it was interrupted before its "
                         "report step); stale, from an earlier run: results/report.json, "
                         "results/ab.json")
    assert "failed job" not in text


def test_an_ab_only_run_names_the_ab_table_it_wrote_as_its_own(tmp_path):
    """The first `benchflow ab` in an empty directory: the A/B table it has just written
    is this run's report file, not `stale, from an earlier run`; a report there from
    before is the earlier run's."""
    row = tmp_path / "results/ab/host/generic/linear.json"
    write_json(row, ab_row())
    p = stages.Progress(tmp_path)
    p.plan({"ab_pair": 1, "ab": 1, "total": 2})
    finish(p, 1, "ab_pair", str(row.relative_to(tmp_path)))
    write_json(tmp_path / paths.AB, {"pairs": [ab_row()]})
    finish(p, 2, "ab", paths.AB)
    lines = summary_lines(p.summary(success=True))
    assert "reports: results/ab.json" in lines, lines
    assert not [x for x in lines if "stale" in x or "none made" in x], lines
    write_json(tmp_path / paths.REPORT, iree_report())  # an earlier run's report
    lines = summary_lines(p.summary(success=True))
    assert lines[-2:] == ["reports: results/ab.json", "stale, from an earlier run: "
                          "results/report.json (not made by this run: the report was "
                          "not one of its targets)"], lines


# --- item 1: a suite that works in runs/<name>/ -------------------------------------------

def plain_snakemake(*args: str) -> list[str]:
    """The plain `snakemake` command (the workflow profile, profiles/default, picks the
    benchflow logger)."""
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--cores", "2",
            *args]


@pytest.mark.e2e
def test_a_suite_in_its_own_run_directory_reports_its_own_cases(tmp_path):
    """Started where another suite's results are, the suite works in runs/own/: its case
    lines, summary and report files are its own, not the start directory's (which printed
    the other suite's 14 cases). Its unsupported case (int8wo on IREE, decided while
    planning) gets its line too."""
    start = tmp_path / "start"
    other = find(iree_report(), "host/iree/ln_linear_relu-16x32x64-f32/baseline")
    write_json(start / paths.SUITE_MARKER, {"kind": MARKER_KIND, "suite_name": "other",
                                            "configfiles": [str(start / "other.yaml")]})
    write_json(start / paths.REPORT, iree_report())
    iree_batch_on_disk(start, [other])  # results/iree/host/b0.json: the same batch name
    suite = write_suite(tmp_path / "own.yaml", {
        "suite_name": "own",
        "skus": {"host": {"iree": {"target_cpu": "host"},
                          "measurement": copy.deepcopy(FAST_MEASUREMENT)}},
        "workloads": [{"model": "linear", "shapes": [[16, 32, 32]], "backends": ["iree"],
                       "recipes": ["baseline", "int8wo"]}]})
    proc = subprocess.run(plain_snakemake("--configfile", str(suite), "--",
                                          paths.REPORT),
                          cwd=start, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "works in runs/own/" in out  # the Snakefile's notice: it moved
    live, summary = out.split("benchflow summary")
    assert re.search(r"^ok +host/iree/linear-16x32x32-f32/baseline  ", live, re.M), live
    assert re.search(r"^unsupported +host/iree/linear-16x32x32-f32/int8wo  .*— \S", live,
                     re.M), live
    assert other["id"] not in out
    assert "finished: 2 cases: 1 ok, 1 unsupported" in summary, summary
    assert "reports: runs/own/results/report.json" in summary, summary


# --- item 5: Ctrl-C in a real run ----------------------------------------------------------

def _own_sigint() -> None:
    # Python's Ctrl-C handling, whatever the test runner's worker was started with (a
    # SIGINT ignored there would be inherited, and Python keeps it ignored).
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# How long an interrupted run may take to stop: 1.6 s here when the machine is idle
# (an IREE batch whose exports ahead ran on took 45 s, Snakemake's own SIGTERM waits
# for the jobs); the margin is for a loaded CI machine.
STOP_S = 10


def run_until_interrupted(cmd: list[str], ready: str, out: Path,
                          sig: int = signal.SIGINT) -> tuple[int, float]:
    """Runs `cmd` in a process group of its own (as a shell runs a command), gives the
    group `sig` (SIGINT: the terminal's Ctrl-C; SIGTERM: a CI job cancelled) 3 s after
    `ready` is in its output; its exit status, and the seconds it took to stop."""
    with open(out, "w") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=_own_sigint)
    try:
        deadline = time.monotonic() + 300
        while ready not in out.read_text(errors="replace"):
            assert proc.poll() is None, f"ended first ({proc.returncode}):\n{out.read_text()}"
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)
        time.sleep(3)
        assert proc.poll() is None, out.read_text()
        os.killpg(proc.pid, sig)
        start = time.monotonic()
        code = proc.wait(timeout=120)
        return code, time.monotonic() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_says_what_was_measured_names_no_old_report_and_exits_130(tmp_path, sig):
    """A torch case that sleeps 60 s per call, interrupted while its batch runs, in a
    directory with an earlier run's report: one `interrupted:` line, a summary that calls
    that report an earlier run's, none of Snakemake's error blocks for the job it stopped,
    exit 130 (143 for SIGTERM: a CI job cancelled, which printed a WorkflowError and
    `FAILED ... failed job: run_torch`), stopped within STOP_S, and no lock left to
    refuse the rerun."""
    suite = write_suite(tmp_path / "suite.yaml", {
        "suite_name": "sleepy", "model_modules": [str(DATA / "extra_models.py")],
        "skus": {"host": {"iree": {"target_cpu": "host"},
                          "measurement": copy.deepcopy(FAST_MEASUREMENT)}},
        "workloads": [{"model": "sleepy_model", "backends": ["torch-eager"]}]})
    work = tmp_path / "work"
    write_json(work / paths.SUITE_MARKER, {"kind": MARKER_KIND,
                                           **suite_identity([str(suite)]).to_dict()})
    write_json(work / paths.REPORT, iree_report())
    # And its peak (the renders' input): measure_peak, which takes the bench slot the
    # batch waits for, is not this test's job to repeat.
    an_earlier_runs_peak(work)
    # Forced: Snakemake takes an existing report as it is, without running its inputs.
    cmd = plain_snakemake("--directory", str(work), "--configfile", str(suite),
                          "--forcerun", "run_torch", "--", "all")
    code, seconds = run_until_interrupted(cmd, "localrule run_torch:", tmp_path / "out.txt",
                                          sig)
    out = (tmp_path / "out.txt").read_text()
    assert code == 128 + sig, out
    assert seconds < STOP_S, (seconds, out)
    said = [line for line in out.splitlines() if line.startswith("interrupted:")]
    assert said == ["interrupted: 0 cases measured (0 of 1 measuring job finished); rerun "
                    "to finish, finished cases are kept"], out
    summary = out.split("benchflow summary")[1]
    assert ("reports: none made by this run (it was interrupted before its report step); "
            f"stale, from an earlier run: {work}/results/report.json") in summary, summary
    assert "before the interrupt: 0 cases" in summary and "FAILED" not in out
    assert "Error in rule" not in out and "WorkflowError" not in out, out
    assert "Logging error" not in out
    assert not list((work / ".snakemake" / "locks").glob("*")), "a lock left behind"


DIRECTORY_SNAKEFILE = """
rule all:
    input: "results/report.md"

rule report:
    output: json="results/report.json", md="results/report.md"
    shell: "echo '{{}}' > {output.json}; touch {output.md}"
"""


@pytest.mark.e2e
def test_reports_are_named_from_where_the_command_was_typed_not_from_directory(tmp_path):
    """`snakemake --directory work`, typed in the directory above: the report files are
    named as the user reaches them from there (work/results/...), not from work/."""
    (tmp_path / "Snakefile").write_text(DIRECTORY_SNAKEFILE)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", "Snakefile",
                           "--directory", "work", "--cores", "1", "--logger", "benchflow"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "reports: work/results/report.md, work/results/report.json" in out, out


# --- item 12: the terminal environment -----------------------------------------------------

FAILING_SNAKEFILE = TINY_SNAKEFILE + """
rule broken:
    output: "out/broken.txt"
    shell: "echo the tool broke >&2; exit 3"
"""


def tiny_run(tmp_path: Path, *args: str) -> list[str]:
    (tmp_path / "Snakefile").write_text(FAILING_SNAKEFILE)
    return [sys.executable, "-m", "snakemake", "-s", str(tmp_path / "Snakefile"),
            "--directory", str(tmp_path), "--cores", "1", "--logger", "benchflow", *args]


def in_pty(cmd: list[str], env: dict) -> tuple[int, str]:
    """Runs `cmd` with a fresh pseudo-terminal (0 rows, 0 columns) as its every stream."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, stdin=follower, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every writer has closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return proc.wait(timeout=300), b"".join(chunks).decode(errors="replace")


def assert_everything_said(code: int, out: str) -> None:
    """A failing run's lines: Snakemake's error block, the ETA, the summary, exit 1."""
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # a terminal's colours, where it has them
    assert code == 1, out
    assert "Error in rule broken" in out, out
    assert re.search(r"^ETA ", out, re.M) and "benchflow summary" in out, out
    assert "FAILED: 0 cases" in out and "failed job: broken" in out, out


@pytest.mark.e2e
@pytest.mark.parametrize("columns", ["0", "abc"])
@pytest.mark.parametrize("where", ["pipe", "pty"])
def test_a_width_of_zero_or_not_a_number_still_prints_everything(tmp_path, columns, where):
    """COLUMNS=0 made rich print nothing: no job lines, no summary, a failing run ended
    with exit 1 and not a word."""
    env = {**os.environ, "COLUMNS": columns, "TERM": "xterm-256color"}
    cmd = tiny_run(tmp_path, "--keep-going", "--", "out/broken.txt", "all")
    if where == "pty":
        code, out = in_pty(cmd, env)
    else:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        code, out = proc.returncode, proc.stdout + proc.stderr
    assert_everything_said(code, out)


@pytest.mark.e2e
def test_no_color_prints_no_escape_sequence_on_a_terminal(tmp_path):
    env = {**os.environ, "NO_COLOR": "1", "TERM": "xterm-256color"}
    env.pop("COLUMNS", None)
    code, out = in_pty(tiny_run(tmp_path, "--keep-going", "--", "out/broken.txt", "all"), env)
    assert_everything_said(code, out)
    assert "\x1b[" not in out, repr(out[-500:])
    # Without it, the terminal gets its colours (the same run, so the check can fail).
    env.pop("NO_COLOR")
    shutil.rmtree(tmp_path / "out", ignore_errors=True)
    _code, coloured = in_pty(tiny_run(tmp_path, "--keep-going", "--", "out/broken.txt",
                                      "all"), env)
    assert "\x1b[" in coloured


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["json", "quiet"])
def test_output_to_a_full_device_is_said_once_and_fails_the_run(tmp_path, mode):
    """`> /dev/full` (the formats that print on stdout; text prints on stderr, and a
    full stderr ends Snakemake itself before any job, with exit 1): "Logging error"
    tracebacks and exit 0 before. Now one line on stderr, and exit 1; the jobs run."""
    cmd = tiny_run(tmp_path, "--logger-benchflow-format", mode, "--", "all")
    with open("/dev/full", "w") as full, open(tmp_path / "err.txt", "w") as err:
        proc = subprocess.run(cmd, stdout=full, stderr=err, timeout=300)
    err_text = (tmp_path / "err.txt").read_text()
    assert proc.returncode == 1, err_text
    assert "Logging error" not in err_text and "Traceback" not in err_text, err_text
    said = [x for x in err_text.splitlines() if x.startswith("benchflow: cannot write")]
    assert said == ["benchflow: cannot write the progress to stdout (No space left on "
                    "device): nothing more is printed there; the run goes on, and exits "
                    "1"], err_text
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"{i}.txt"
                                                                    for i in range(4)]


@pytest.mark.e2e
def test_benchflow_ab_beside_another_suites_results_shows_its_own(tmp_path):
    """`benchflow ab` started where another suite's results are: its suite works in
    runs/pairs/, and the terminal shows the pair's row and that directory's reports,
    never the other suite's cases (items 1 to 3 through the command, not only snakemake)."""
    start = tmp_path / "start"
    other = find(iree_report(), "host/iree/ln_linear_relu-16x32x64-f32/baseline")
    write_json(start / paths.SUITE_MARKER, {"kind": MARKER_KIND, "suite_name": "other",
                                            "configfiles": [str(start / "other.yaml")]})
    write_json(start / paths.REPORT, iree_report())
    fast = copy.deepcopy(FAST_MEASUREMENT)
    suite = write_suite(tmp_path / "pairs.yaml", {
        "suite_name": "pairs",
        "skus": {"a": {"iree": {"target_cpu": "host", "device": "local-sync"},
                       "measurement": fast},
                 "b": {"iree": {"target_cpu": "host", "device": "local-sync"},
                       "measurement": fast}},
        "workloads": [{"model": "linear", "shapes": [[16, 32, 32]], "backends": ["iree"]}],
        "ab_pairs": [{"base": "a", "new": "b"}],
        # The fewest rounds the A/B plan takes (one look): the test reads where the row
        # and the reports are shown, not what the pair's verdict is.
        "ab": {"max_rounds": 6, "budget_s": 20}})
    proc = subprocess.run([str(Path(sys.executable).parent / "benchflow"), "ab",
                           "--configfile", str(suite), "--cores", "2"],
                          cwd=start, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode in (0, 3), out
    assert "works in runs/pairs/" in out, out
    assert re.search(r"^\S+ +a -> b  linear-16x32x32-f32", proc.stdout, re.M), out
    assert other["id"] not in out and "14 cases" not in out, out
    assert (start / "runs" / "pairs" / "results" / "ab.json").is_file()
    assert json.loads((start / paths.REPORT).read_text()) == iree_report()  # untouched
