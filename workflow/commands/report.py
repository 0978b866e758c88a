"""The report step: every case record -> results/report.json, validated before writing.

It never crashes on a damaged record (read_case: a failed case of the planned identity,
measured again by the next run) and never loses the previous report: it writes the new
one atomically once complete (the rule's output is update(), so Snakemake keeps the old
one until then, and restores it when the job fails)."""

from __future__ import annotations

import json
from pathlib import Path

from workflow.backends.git import git_sha
from workflow.errors import ConfigError
from workflow.paths import REPO_ROOT
from workflow.records.case import case_record, skipped_case, unsupported_case
from workflow.records.report import build_report, case_problem, validate_report
from workflow.records.storage import read_json_file, write_json
from workflow.regression.gate import golden_file_for, golden_section, judged_with_drift
from workflow.stats.enums import Status
from workflow.stats.speedup import fill_paired, fill_speedups

# The stage of a case whose record could not be used (absent, not JSON, not its own).
RECORD_STAGE = "record"


def record_problem(path: str, record, case_id: str) -> str | None:
    """Why the record read from `path` is not the case record of `case_id`, or None."""
    if not isinstance(record, dict):
        return f"{path}: expected the case record of {case_id} (a JSON object), got " \
               f"{type(record).__name__} {json_preview(record)}"
    if "id" not in record:
        return f"{path}: no `id`: expected the case record of {case_id}, got " \
               f"{json_preview(record)}"
    if record["id"] != case_id:
        return f"{path}: id {record['id']!r}: expected the case record of {case_id}, not " \
               "another case's"
    problem = case_problem(record)
    return f"{path}: {problem}" if problem else None


def json_preview(value, limit: int = 60) -> str:
    """`value` as JSON, cut to `limit` characters: what an error message shows of it."""
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def read_case(planned: dict) -> tuple[dict, bool]:
    """A planned case's record (`planned`: record path and identity, from
    workflow.planning.plan.report_records), and whether it was usable. One that is absent,
    not JSON, of another case or not a valid case record becomes a failed case of the
    planned identity at stage `record`, its error naming the file and what was wrong:
    the report stays complete, and never crashes on it."""
    path, identity = planned["record"], planned["identity"]
    try:
        record = read_json_file(path)
    except ConfigError as exc:
        problem = exc.problems[0]
    else:
        problem = record_problem(path, record, identity["id"])
        if problem is None:
            return record, True
    return case_record(identity, status=Status.FAILED, stage=RECORD_STAGE,
                       error=f"{problem}; the next run measures this case again"), False


def collect_cases(records: list[dict], unsupported: list[dict] = (),
                  golden_files: list[str] = (), gate: dict | None = None,
                  skipped: list[dict] = (), damaged: list[dict] | None = None,
                  ab_rows: list[str] = ()) -> list[dict]:
    """Case records of every measured case (`records`, planned: IREE and torch cases are
    judged here against their SKU's golden file, so that blessing never re-measures;
    benchmark files' cases were judged in their own case step), and the cases known
    unsupported or skipped while planning (recorded with their reasons, never dropped).
    A planned record that cannot be used is a failed case (read_case), and is added to
    `damaged`. Speedups are ratios of the cases' medians, except where one of `ab_rows`
    (torch A/B rows, plan.speedup_ab_rows) measured the two sides interleaved."""
    by_sku = {Path(g).stem: g for g in golden_files}
    cases = []
    for planned in records:
        case, usable = read_case(planned)
        if not usable and damaged is not None:
            damaged.append(planned)
        if planned["judge"] and gate is not None:
            case["golden"] = golden_section(case, by_sku.get(case["sku"]), gate)
        cases.append(case)
    if gate is not None:
        # A benchmark-file case on a SKU without IREE or torch cases was judged in its
        # case step against its SKU's golden file, which by_sku does not hold.
        cases = judged_with_drift(cases, lambda c: by_sku.get(c["sku"]) or golden_file_for(c),
                                  gate)
    cases += [unsupported_case(u["identity"], u["reason"]) for u in unsupported]
    cases += [skipped_case(u["identity"], u["reason"], u.get("provenance")) for u in skipped]
    fill_speedups(cases)
    fill_paired(cases, [read_json_file(p) for p in ab_rows])
    return cases


def damage_note(path: str) -> dict | None:
    """The report's damage note (`path`, paths.REPORT_DAMAGED): which records the last
    report that found any could not use. A param of the report rule: a new note reruns
    the report once; nothing removes it, so the next plan sees the param the report ran
    with and reruns nothing."""
    try:
        note = read_json_file(path)
    except ConfigError:
        return None
    return note if isinstance(note, dict) else None


def redo_damaged(damaged: list[dict], note: str) -> None:
    """Makes the next run measure the cases of `damaged` records again. A benchmark
    file's record is its case step's own output: it is removed, so that Snakemake makes
    it again. IREE and torch records belong to their batches, whose files the Snakefile
    checks at load (plan.verify_batches: a damaged member reruns its batch). And the
    report gets a new damage note, so that it reruns too: Snakemake makes a missing file
    again only for a job that runs."""
    for planned in damaged:
        if planned["redo"] == planned["record"]:
            Path(planned["record"]).unlink(missing_ok=True)
    count = (damage_note(note) or {}).get("count", 0)
    write_json(note, {"count": count + 1 if isinstance(count, int) else 1,
                      "records": {p["record"]: p["identity"]["id"] for p in damaged}})


def aggregate(records: list[dict], out: str, *, unsupported: list[dict] = (),
              golden_files: list[str] = (), gate: dict | None = None,
              skipped: list[dict] = (), derived: list[str] = (), note: str | None = None,
              ab_rows: list[str] = (), **kwargs) -> dict:
    """Writes the report of `records` (see collect_cases) to `out`, atomically: the
    previous report stays whole until the new one is complete and valid. The files made
    from the report alone (`derived`: report.md, ...) are removed first, so none of them
    ever shows another report than `out`. Cases whose records could not be used are
    measured again by the next run (redo_damaged, with the damage note `note`)."""
    damaged: list[dict] = []
    cases = collect_cases(list(records), list(unsupported), list(golden_files), gate,
                          list(skipped), damaged, list(ab_rows))
    # The commit of the checkout that holds the Snakefile (this package is in it), not of
    # the working directory: under `snakemake --directory D`, D is often no repository.
    report = build_report(cases, git_sha=git_sha(REPO_ROOT), **kwargs)
    validate_report(report)
    for path in derived:
        Path(path).unlink(missing_ok=True)
    write_json(out, report)
    if damaged and note is not None:
        redo_damaged(damaged, note)
    for case in cases:
        if case["stage"] == RECORD_STAGE:
            print(f"benchflow: {case['id']}: failed: {case['error']}")
    return report
