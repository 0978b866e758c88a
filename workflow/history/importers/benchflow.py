"""benchflow's own files: results/report.json of any 1.x schema, a `benchflow run -o`
results file (kind benchflow-results), a Forge list whose entries hold benchflow records.
Rows are render/dashboard.records of the report, as results/dashboard.json has them
(with the percent-of-peak figures of the peak measured beside the report, peak.json).

A report is one run, measured at provenance.started_at (else generated_at), with its
git_sha as head_sha. A results file gets one record appended per `benchflow run`, so
each record is its own run, measured at its own provenance.started_at; its host is the
record's provenance.host (a results file has no report-level provenance).

Older reports: 1.0 and 1.1 reports validate against today's schema as they are (fields
were only added; tests/data/report_*.json are 1.0). The very first 1.0 reports
(benchflow 2f2f101) lack `device` and `speedup`, which later versions require and
whose schema defaults say what an old report meant (a CPU case, no speedup); they are
filled from those defaults, and the report must then validate."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import jsonschema

from workflow.errors import ConfigError
from workflow.history.importers.run import make_run, problem, unix_time
from workflow.paths import PEAK
from workflow.records import report as rep
from workflow.records.results_file import FORGE_RECORD_KEY, KIND, is_forge_results
from workflow.records.storage import read_json_file
from workflow.render import dashboard

SOURCE = "benchflow-report"
# Fields of every case record since the first report that dashboard.records reads and
# the schema leaves optional.
CASE_REQUIRES = ("workload",)


def detect(doc) -> bool:
    if isinstance(doc, dict):
        return "cases" in doc and ("schema_version" in doc or doc.get("kind") == KIND)
    return is_forge_results(doc) and any(
        isinstance(e.get(FORGE_RECORD_KEY), dict) for e in doc)


def runs(path: Path, doc, timestamp: int | None, reuse: bool = False) -> list:
    """reuse: `doc` is the file's document as parsed, with no NaN or Infinity."""
    try:
        report = rep.read_report(path, results_files=True, case_requires=CASE_REQUIRES,
                                 parsed=doc if reuse else None)
    except rep.ReportError:
        # Only a document of plain JSON may be an older report to upgrade: one holding
        # NaN or Infinity was refused for that (a report's numbers are finite).
        report = _upgraded(path, doc) if reuse else None
        if report is None:
            raise
    if "kind" not in report:
        return [_report_run(path, report)]
    return [_record_run(path, case, i) for i, case in enumerate(report["cases"])]


def _report_run(path: Path, report: dict):
    prov = report.get("provenance") or {}
    when = prov.get("started_at") or report.get("generated_at")
    key = "provenance.started_at" if prov.get("started_at") else "generated_at"
    run_time = unix_time(when, path, key)
    rows = measured_times(dashboard.records(report, peak_beside(path)), report["cases"],
                          path, run_time)
    return make_run(SOURCE, path, run_time, rows,
                    {"head_sha": prov.get("git_sha"), "name": dashboard.BENCHMARK_NAME},
                    cases=len(report["cases"]))


def peak_beside(path: Path) -> dict | None:
    """The machine's measured matmul peak beside a report (results/peak.json), which its
    dashboard.json's percent-of-peak figures used: with it the report's rows are that
    file's rows, so ingesting both adds each once. None when there is none."""
    peak_path = path.parent / Path(PEAK).name
    if not peak_path.is_file():
        return None
    peak = read_json_file(peak_path)
    gflops = peak.get("gflops") if isinstance(peak, dict) else None
    if isinstance(gflops, bool) or not isinstance(gflops, int | float) \
            or not math.isfinite(gflops) or gflops <= 0:
        raise problem(peak_path, "gflops", f"{gflops!r}", "the measured peak in GFLOP/s, a "
                      "positive number, as `snakemake results/peak.json` writes it")
    return peak


def measured_times(rows: list[dict], cases: list[dict], path: Path, default: int) -> list[dict]:
    """Each row's own `timestamp`: when its case was measured (timing.measured_at, else
    the case's provenance.started_at, else the run's). A case a report took over from
    an earlier run (its jobs were up to date) keeps that run's time, so its numbers are
    the same measurement as before, which ingest then adds only once."""
    stamps = {}
    for i, case in enumerate(cases):
        when = (case.get("timing") or {}).get("measured_at") \
            or (case.get("provenance") or {}).get("started_at")
        if when:
            stamps[case["id"]] = unix_time(when, path, f"cases[{i}].timing.measured_at")
    for row in rows:
        row["timestamp"] = stamps.get(row["benchmark"]["extra_info"]["case_id"], default)
    return rows


def _record_run(path: Path, case: dict, index: int):
    """One appended record: its own run, its host the record's."""
    prov = case.get("provenance") or {}
    when = prov.get("started_at") or (case.get("timing") or {}).get("measured_at")
    if not when:
        raise problem(path, f"cases[{index}].provenance.started_at", "absent",
                      "the time the record was measured")
    host = prov.get("host")
    report = {"provenance": {"host": {"name": host} if isinstance(host, str) else {}},
              "cases": [case]}
    run_time = unix_time(when, path, f"cases[{index}].provenance.started_at")
    rows = measured_times(dashboard.records(report), [case], path, run_time)
    return make_run(SOURCE, path, run_time, rows, {"name": dashboard.BENCHMARK_NAME},
                    cases=1)


def _upgraded(path: Path, doc) -> dict | None:
    """An older report with the fields later minors added filled from the schema's
    defaults, validated; None when it is no older report or still invalid."""
    if not (isinstance(doc, dict) and isinstance(doc.get("cases"), list)
            and doc.get("kind") is None):
        return None
    version = str(doc.get("schema_version", ""))
    major, _, minor = version.partition(".")
    current = rep.SCHEMA_VERSION.split(".")
    if major != current[0] or not minor.isdigit() or int(minor) > int(current[1]):
        return None
    case_def = rep.report_schema()["$defs"]["case"]
    defaults = {k: case_def["properties"][k]["default"] for k in case_def["required"]
                if "default" in case_def["properties"].get(k, {})}
    report = copy.deepcopy(doc)
    for case in report["cases"]:
        if isinstance(case, dict):
            for key, value in defaults.items():
                case.setdefault(key, copy.deepcopy(value))
    try:
        rep.validate_report(report)
    except jsonschema.ValidationError:  # read_report's message (raised by the caller) says it
        return None
    missing = [i for i, c in enumerate(report["cases"]) if "workload" not in c]
    if missing:
        raise ConfigError([f"{path}: cases[{missing[0]}].workload: absent; expected a "
                           "benchflow case record"])
    return report
