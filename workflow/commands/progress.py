"""A run's progress as its jobs finish (issue 24): the records a finished job wrote, the
ETA of the jobs left, and the summary at the end. The Snakemake logger plugin
(snakemake_logger_plugin_benchflow) feeds `Progress` the scheduler's events and prints
what it returns; the events themselves are render/progress.py's.

Only what a job wrote is read, after Snakemake saw it finish: an IREE batch's list of
its case records, a torch batch's records, a benchmark file's record, an A/B row, and at
the end the report. On SLURM those are the files the job wrote on its node, read from
the shared file system as the report step reads them.

Every path is read under the directory the workflow runs in (`root`), which is not the
one snakemake was started in when the suite works in `runs/<name>/`
(planning/suite_dir.py); the report files are named relative to the start directory, as
the user would open them. A torch case's line waits for the report (the report step
judges torch cases against the goldens: their records carry no verdict), and the cases
decided unsupported or skipped while planning, which no job measures, get theirs from
the report too."""

from __future__ import annotations

import os
import time
from pathlib import Path

from workflow.errors import ConfigError
from workflow.paths import AB, GATE, HISTORY_HTML, REPORT, REPORT_CSV, REPORT_HTML, REPORT_MD
from workflow.planning.resources import ESTIMATE_MARGIN, JOB_OVERHEAD_S
from workflow.records.storage import read_json
from workflow.render import common as c
from workflow.render import progress as render
from workflow.stats.enums import Status

# The rules whose jobs measure cases, and how their records are found from the output.
CASE_RULES = {"iree_batch", "run_torch", "case_bench_file"}
AB_RULES = {"ab_pair", "ab_torch_pair"}
# Rules whose `runtime` request planning/resources.py sizes from what their cases are
# expected to take (the measurement settings, earlier records of the same cases).
MEASURING_RULES = (CASE_RULES - {"case_bench_file"}) | AB_RULES | {"run_bench_file"}
# Whose case records carry no golden verdict: the report step judges them (rules/report.smk).
JUDGED_AT_REPORT = {"run_torch"}
# A case with this status in the report that no job's record showed was decided while the
# suite was planned (planning/plan.py's unsupported_plan, bench_skipped_plan).
PLANNED_STATUSES = (Status.UNSUPPORTED, Status.SKIPPED)
# The jobs whose results a report is made from: once one ran, an older report is stale.
FEEDS_REPORT = CASE_RULES | MEASURING_RULES
NOT_JUDGED = ("golden: not judged (torch cases are judged when the report is made, and "
              "this run made none)")


def _read(path: Path) -> dict | None:
    """A JSON document a job wrote; None when it is not there or not JSON (a job that
    failed outright): what it lacks then shows as the failed job in the summary."""
    try:
        doc = read_json(path)
    except (OSError, ValueError, ConfigError):  # ConfigError: a FIFO or device there
        return None
    return doc if isinstance(doc, dict) else None


def case_records(rule: str, output: list[str], root: Path) -> list[dict]:
    """The case records a finished job of `rule` wrote (outputs relative to `root`)."""
    if rule == "iree_batch":
        batch = _read(root / output[0]) or {}
        docs = [_read(root / entry["case"]) for entry in batch.get("cases", [])]
    elif rule == "run_torch":
        # cases/{backend}/{workload}/{recipe}.json (paths.torch_case_record).
        docs = [_read(p) for p in sorted((root / output[0] / "cases").rglob("*.json"))]
    elif rule == "case_bench_file":
        docs = [_read(root / output[0])]
    else:
        return []
    return [d for d in docs if d is not None and "id" in d and "status" in d]


def planned_seconds(runtime_min) -> float | None:
    """What a job's `runtime` request (minutes; planning/resources.py sizes it from the
    expected times, with earlier records of the same cases) expects the job to take:
    the request less the job's overhead allowance, over the estimate's margin."""
    if not isinstance(runtime_min, int | float) or runtime_min <= 0:
        return None
    return max(runtime_min * 60 - JOB_OVERHEAD_S, 0) / ESTIMATE_MARGIN


def report_files(root: Path) -> list[str]:
    """The report files there are, the readable ones first."""
    return [p for p in (REPORT_MD, REPORT_HTML, HISTORY_HTML, REPORT_CSV, REPORT, AB, GATE)
            if (root / p).exists()]


class Progress:
    """The run's state as the scheduler reports it; each method returns the events to
    print (render/progress.py's dicts)."""

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root or os.getcwd())
        self.start = self.root  # where snakemake was started: report paths read from there
        self.jobs: dict[int, dict] = {}  # jobid -> rule, output, log, planned s, start
        self.planned: dict[str, int] = {}  # rule -> jobs in the plan (RUN_INFO's stats)
        self.durations: dict[str, list[float]] = {}  # rule -> this run's finished jobs
        self.done = self.total = 0
        self.cases: dict[str, dict] = {}
        self.lined: set[str] = set()  # the cases given their line
        self.held: dict[str, dict] = {}  # torch records waiting for the report's verdict
        self.ab_rows: list[dict] = []
        self.failed: list[dict] = []
        self.retried: list[dict] = []
        self.stopped: list[dict] = []  # jobs that ended with an error after the interrupt
        self.interrupted = False

    def started(self, root: str | os.PathLike, start: str | os.PathLike | None = None) -> None:
        """The workflow's working directory (Snakemake is in it while it runs, and may
        have left it by the time the summary is printed), and the one snakemake was
        started in, when the suite moved to a directory of its own."""
        self.root = Path(root)
        self.start = Path(start) if start else self.root

    def plan(self, stats: dict) -> None:
        self.planned = {k: v for k, v in stats.items() if k != "total"}

    def job_info(self, jobid: int, rule: str, output: list[str], log: list[str],
                 resources: dict) -> None:
        self.jobs[jobid] = {"rule": rule, "output": list(output), "log": list(log),
                            "planned_s": planned_seconds(resources.get("runtime")),
                            "start": time.monotonic()}

    def job_finished(self, jobid: int) -> list[dict]:
        job = self.jobs.get(jobid)
        if job is None:
            return []
        self.durations.setdefault(job["rule"], []).append(time.monotonic() - job["start"])
        # A failed attempt that was retried (--retries, profiles/slurm) and then finished.
        self.retried += [f for f in self.failed if f["jobid"] == jobid]
        self.failed = [f for f in self.failed if f["jobid"] != jobid]
        events = []
        for record in case_records(job["rule"], job["output"], self.root):
            self.cases[record["id"]] = record
            if job["rule"] in JUDGED_AT_REPORT:
                self.held[record["id"]] = record
            else:
                events.append(self._line(record))
        if job["rule"] in AB_RULES:
            row = _read(self.root / job["output"][0])
            if row is not None:
                self.ab_rows.append(row)
                events.append(render.ab_event(row))
        if job["rule"] == "report":
            events += self._report_lines()
        return events

    def _line(self, case: dict) -> dict:
        self.lined.add(case["id"])
        return render.case_event(case)

    def _report_lines(self) -> list[dict]:
        """Once the report is made: the line of each torch case this run measured, with
        the report's verdict, and of each case decided while planning (unsupported,
        skipped), which no job wrote a record of."""
        cases = (_read(self.root / REPORT) or {}).get("cases")
        events = []
        for case in cases if isinstance(cases, list) else []:
            if not isinstance(case, dict) or not isinstance(case.get("id"), str):
                continue
            if case["id"] in self.held or (case["id"] not in self.lined
                                           and case.get("status") in PLANNED_STATUSES):
                self.held.pop(case["id"], None)
                events.append(self._line(case))
        return events

    def unjudged(self) -> list[dict]:
        """The lines of torch cases still waiting for a report this run did not make (it
        failed, stopped, or was not asked for): their records, said to be unjudged."""
        events = []
        for record in self.held.values():
            event = self._line(record)
            event.update(verdict=None, verdict_text=None,
                         reason="; ".join(r for r in (event["reason"], NOT_JUDGED) if r))
            events.append(event)
        self.held.clear()
        return events

    def job_error(self, jobid: int, rule: str, log: list[str]) -> None:
        # After Ctrl-C a job's error is the interrupt's: it was stopped, not broken.
        (self.stopped if self.interrupted else self.failed).append(
            {"rule": rule, "jobid": jobid, "log": list(log)})

    def interrupt(self) -> None:
        self.interrupted = True

    def progress(self, done: int, total: int) -> list[dict]:
        self.done, self.total = done, total
        return [render.eta_event(done, total, self._left())]
    def _left(self) -> dict[str, dict]:
        """Per rule: jobs not finished, and what one is expected to take: this run's
        mean for the rule; else, for a measuring rule, the planned runtime of its jobs
        started so far (the other rules' requests are caps, not estimates); else this
        run's mean job of the same kind (measuring or not: a report step is not priced
        like a batch that measures for minutes); else not estimated yet."""
        finished = {r: len(d) for r, d in self.durations.items()}
        left = {}
        for rule, count in self.planned.items():
            plans = [j["planned_s"] for j in self.jobs.values()
                     if j["rule"] == rule and j["planned_s"] is not None]
            kind = rule in MEASURING_RULES
            every = [s for r, d in self.durations.items() if (r in MEASURING_RULES) == kind
                     for s in d]
            if rule in self.durations:
                seconds, basis = sum(self.durations[rule]) / finished[rule], "rule"
            elif plans and kind:
                seconds, basis = sum(plans) / len(plans), "plan"
            elif every:
                seconds, basis = sum(every) / len(every), "run"
            else:
                seconds, basis = None, ""
            left[rule] = {"jobs": max(count - finished.get(rule, 0), 0), "seconds": seconds,
                          "basis": basis}
        return left

    def current(self, rule: str, feeding: set[str]) -> bool:
        """Whether the output of `rule` (the report, the A/B table) there is this run's:
        it made it, or it ran no job of `feeding`, which it is made from, and was not
        interrupted (the output then stands for the cases as they are). Otherwise one
        there is an earlier run's, however this run ended."""
        if rule in self.durations:
            return True
        return not self.interrupted and not any(j["rule"] in feeding
                                                for j in self.jobs.values())

    def shown(self, path: str) -> str:
        """A path under the working directory as the user names it from the directory
        snakemake was started in (`runs/<name>/results/report.md` for a suite that
        moved there), or absolute when that directory is not under it."""
        full = self.root / path
        try:
            return str(full.resolve().relative_to(self.start.resolve()))
        except ValueError:
            return str(full)

    def summary(self, success: bool) -> dict:
        """The summary: the report's cases where it is this run's (`current`: the
        report applies the goldens to every case), else the cases seen finishing (a run
        that stopped before its report: the old one is not this run's, and its files
        are named as an earlier run's, not as this run's reports)."""
        current = self.current("report", FEEDS_REPORT)
        report = _read(self.root / REPORT) if current else None
        cases = (report or {}).get("cases")
        if not isinstance(cases, list):
            cases = list(self.cases.values())
        ab = _read(self.root / AB) if self.current("ab", AB_RULES) else None
        rows = ab["pairs"] if ab and isinstance(ab.get("pairs"), list) else self.ab_rows
        # Each file is this run's as the step that makes it is: ab.json the A/B table's
        # (an A/B-only run writes it, and no report), the others the report's.
        made = {AB: self.current("ab", AB_RULES)}
        files = report_files(self.root)
        this_run = [self.shown(p) for p in files if made.get(p, current)]
        stale = [self.shown(p) for p in files if not made.get(p, current)]
        event = render.summary_event(cases, rows, failed_jobs=self.failed,
                                     retried_jobs=self.retried, reports=this_run,
                                     success=success)
        timed = [x for x in cases if c.median_ms(x) is not None]
        event.update(reports_current=current, stale_reports=stale,
                     timed=len(timed),
                     disturbed=sorted(x["id"] for x in timed if c.disturbed(x)),
                     interrupted=self._interruption() if self.interrupted else None)
        return event

    def _interruption(self) -> dict:
        """What an interrupted run did: the cases measured (their jobs finished; their
        records are kept, so a rerun does not measure them again), of how many
        measuring jobs, and the jobs the interrupt stopped."""
        rules = CASE_RULES | AB_RULES
        return {"cases": len(self.cases), "ab_rows": len(self.ab_rows),
                "jobs_done": sum(len(d) for r, d in self.durations.items() if r in rules),
                "jobs": sum(n for r, n in self.planned.items() if r in rules),
                "stopped": self.stopped}
