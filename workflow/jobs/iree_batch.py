"""An IREE batch job (one Snakemake job for about iree_batch_size cases of one SKU): which
members' results on disk can be reused (their content key and the fingerprints of every
file they are made of), and the measuring of the others, each through jobs/iree.py's
case_job, with one log line per member saying why it was reused or measured."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from workflow.backends.iree import gpu_chip
from workflow.backends.iree import tools as iree
from workflow.jobs.iree import RUN_ID_ENV, case_export, case_files, case_job
from workflow.planning import keys
from workflow.planning.members import members_path, read_members, repair_note
from workflow.planning.resources import export_workers
from workflow.planning.targets import with_target
from workflow.records.storage import fingerprint, fingerprint_problem, read_json, write_json
from workflow.stats.enums import Status

# Set by the planning process (rules/iree_batch.smk) for the batch jobs it starts: the
# targets of its --forcerun (rule names or files), "*" for --forceall, as a JSON list.
FORCED_ENV = "BENCHFLOW_FORCED"
_FORCE_OPTIONS = ("--forcerun", "-R")
_FORCE_ALL = ("--forceall", "-F")


def forced_targets(argv: list[str]) -> list[str]:
    """What a snakemake command line forces, read from its arguments: the targets of
    --forcerun / -R (the words after it up to the next option, as snakemake's nargs="*"
    takes them, or `--forcerun=x`), and "*" for --forceall / -F. Snakemake tells a job
    nothing of why it runs, and its settings are not yet set when the Snakefile is read,
    so the planning process reads its own command line."""
    out, taking = [], False
    for arg in argv:
        if arg.startswith("-"):
            name, eq, value = arg.partition("=")
            taking = name in _FORCE_OPTIONS and not eq
            if name in _FORCE_OPTIONS and eq:
                out.append(value)
            if arg in _FORCE_ALL:
                out.append("*")
        elif taking:
            out.append(arg)
    return sorted(set(out))


def forced_by_command(batch: str, rule: str = "iree_batch") -> bool:
    """Whether the run that started this job forced it (FORCED_ENV): --forceall,
    --forcerun of its rule (iree_batch, run_torch), or --forcerun naming this batch's
    output. Then every member is measured again, as the README and DESIGN promise, even
    where a damaged member alone would have rerun the batch."""
    try:
        targets = json.loads(os.environ.get(FORCED_ENV) or "[]")
    except ValueError:
        return False
    if not isinstance(targets, list):
        return False
    named = {os.path.normpath(t) for t in targets if isinstance(t, str)}
    return bool(named & {"*", rule, os.path.normpath(batch)})


def member_entry(identity: dict, parts: dict, timeouts: dict, record: dict) -> dict:
    """What a batch keeps of a case it measured (in {batch}.members.json): the key and its
    parts, the status, the timeouts and run of a failure, and the fingerprint of every
    file the case is made of that exists."""
    files = {p: fingerprint(p) for p in case_files(identity).values() if os.path.isfile(p)}
    return {"key": keys.digest(parts), "parts": parts, "status": record.get("status"),
            "timeouts": timeouts, "run_id": os.environ.get(RUN_ID_ENV), "files": files}


def reuse_problem(entry: dict | None, case_id: str, parts: dict, timeouts: dict, *,
                  retry_failures: bool, quick: bool = False) -> str | None:
    """Why a case's results on disk cannot be reused, or None when they can: the key of
    its parts must be the one recorded, every file it was made of must have the bytes it
    had (a record deleted, cut short, edited by hand or swapped with another case's, an
    MLIR or module truncated: each is measured again), and a failure is tried again with
    other timeouts or when the rerun was forced. `quick` trusts an unchanged size and
    mtime (the Snakefile's check at load); the batch job hashes."""
    if not entry:
        return "not measured yet"
    if entry.get("key") != keys.digest(parts):
        return "its inputs changed: " + keys.changed_parts(entry.get("parts"), parts)
    record = case_files(parts["identity"])["record"]
    if record not in (entry.get("files") or {}):
        return f"{record}: no fingerprint was recorded for it"
    for path, fp in entry["files"].items():
        problem = fingerprint_problem(path, fp, quick=quick)
        if problem:
            return f"{path}: {problem}"
    if entry.get("status") == Status.FAILED:
        if entry.get("timeouts") != timeouts:
            return "it failed, and the timeouts changed since"
        run = os.environ.get(RUN_ID_ENV)
        if retry_failures and (run is None or entry.get("run_id") != run):
            return "it failed, and this rerun was forced"
    if quick:
        return None
    try:
        data = read_json(record)
    except (OSError, ValueError) as exc:
        return f"{record}: unreadable ({exc})"
    if not isinstance(data, dict) or data.get("id") != case_id:
        return f"{record}: not the record of {case_id}"
    return None


def batch_job(*, cases: list[dict], sku: dict, tolerances: dict, timeouts: dict, gate: dict,
              batch: str, log: str, content: dict | None = None,
              targets: dict | None = None, threads: int = 1) -> dict:
    """Measures one SKU's IREE cases one after the other (case_job), listed in `batch`.

    Snakemake reruns a batch when its plan, its SKU, or the content it is made from
    (`content`: model sources, tool builds) changed, or its list is missing; then only the
    members whose results cannot be reused (reuse_problem: a changed key, a file that no
    longer verifies, a failure to retry) are measured again, each with one log line
    saying why. The rerun was forced when the command says so (forced_by_command, even
    with a damaged member) or every member could be reused with the last run's inputs:
    then every member is measured again, failures retried. The members' entries are
    kept beside the batch list, where Snakemake does not delete them. `targets`: the
    width a case judged by a golden measures towards (planning/targets.py); `threads`:
    the job's cores (export_ahead)."""
    # `target_chip: auto` becomes this machine's GPU's chip here, where the cases are
    # compiled and measured (the planning machine may have no GPU); keys cover both.
    sku, choice = gpu_chip.resolve_auto_chip(sku)
    # A compile-only result is not reused where the SKU's device exists.
    device_here = iree.device_absent_reason(sku["iree"]["device"]) is None
    parts = [keys.case_parts(c, sku, tolerances, device_here,
                             choice.key() if choice else None) for c in cases]
    # What Snakemake reran the job for: the params, and the repair note (the Snakefile
    # found a damaged member, which may verify again by now if another SKU's batch made
    # its export anew, byte-identical); the same context as last time means forced.
    repair = repair_note(batch)
    context = keys.digest([cases, sku, tolerances, timeouts, content, repair])
    mpath = members_path(batch)
    last_context, members = _last_context(mpath), read_members(mpath)
    problems = [reuse_problem(members.get(c["identity"]["id"]), c["identity"]["id"], p,
                              timeouts, retry_failures=False)
                for c, p in zip(cases, parts, strict=True)]
    forced = forced_by_command(batch) or (last_context == context and not any(problems))
    reuse = [problem is None and not forced for problem in problems]
    # None for an auto SKU that found no chip (case_job: unsupported, nothing exported).
    exported_s = {} if choice is not None and choice.chip is None else export_ahead(
        [c for c, r in zip(cases, reuse, strict=True) if not r], timeouts, threads, forced)
    listed, kept = [], {}

    def keep() -> None:
        # After each measured member, with no context (never taken as forced): a job
        # killed outright (SLURM's SIGKILL after its grace, the OOM killer) keeps it too.
        write_json(mpath, {"context": None, "members": kept, "repair": repair})

    try:
        _measure_members(cases, parts, problems, reuse, members, sku, choice, targets,
                         tolerances, timeouts, gate, forced, exported_s, log, listed, kept,
                         keep)
    except BaseException:
        # Interrupted (or failed) part way: the members measured so far are kept, so
        # that the rerun reuses them; no context, so that it is never taken as forced.
        write_json(mpath, {"context": None, "members": kept, "repair": repair})
        raise
    write_json(mpath, {"context": context, "members": kept, "repair": repair})
    write_json(batch, {"cases": listed})
    return {"cases": listed}


def _measure_members(cases, parts, problems, reuse, members, sku, choice, targets,
                     tolerances, timeouts, gate, forced, exported_s, log, listed,
                     kept, keep) -> None:
    """batch_job's loop: each case reused or measured (case_job), into `listed` and
    `kept` as it is done; `keep()` writes `kept` after each measured one."""
    with open(log, "a", encoding="utf-8", errors="replace") as fh:
        for case, part, problem, reused in zip(cases, parts, problems, reuse, strict=True):
            ident = case["identity"]
            key = keys.digest(part)
            path = case_files(ident)["record"]
            print(f"{ident['id']}: {_member_why(reused, forced, problem)} ({key})", file=fh,
                  flush=True)
            if reused:
                kept[ident["id"]] = members[ident["id"]]
            else:
                record = case_job(spec=case["spec"], identity=ident,
                                  sku=with_target(sku, (targets or {}).get(ident["id"])),
                                  tolerances=tolerances, timeouts=timeouts, gate=gate, key=key,
                                  case=path, retry_failures=forced, chip_choice=choice,
                                  log=_case_log(ident),
                                  exported_s=exported_s.get(ident["workload"], 0.0))
                kept[ident["id"]] = member_entry(ident, part, timeouts, record)
                keep()
            listed.append({"id": ident["id"], "case": path, "key": key, "reused": reused,
                           "sha256": kept[ident["id"]]["files"][path]["sha256"]})


def export_ahead(cases: list[dict], timeouts: dict, threads: int,
                 retry_failures: bool) -> dict[str, float]:
    """Makes the exports of `cases` (one per workload) several at a time (one per thread
    of the job: resources.export_workers) before any of them is measured, and returns
    the seconds each took (workload id -> s). An export
    is a torch process that mostly runs Python on one core: one after another they
    were most of an IREE GPU batch (H100: 11-18 s each beside 2-10 s of compiling and
    timing). Nothing is timed meanwhile, as the batch measures after; each export
    writes its own case's log, and a failure is recorded in its meta as case_job's
    would be (case_job then reuses what was made, or the failure)."""
    by_workload = {c["identity"]["workload"]: c for c in cases}
    workers = export_workers(len(by_workload), threads)
    if workers < 2:
        return {}

    def made(case: dict) -> float:
        t0 = time.perf_counter()
        log = _case_log(case["identity"])
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        case_export(spec=case["spec"], identity=case["identity"], timeouts=timeouts, log=log,
                    retry_failures=retry_failures)
        return time.perf_counter() - t0

    with ThreadPoolExecutor(workers) as pool:
        running = {w: pool.submit(made, c) for w, c in by_workload.items()}
        try:
            return {w: job.result() for w, job in running.items()}
        except BaseException:
            # Interrupted: the exports not started never start (the running ones'
            # tools were killed by the interrupt: jobs/job.py).
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def _case_log(identity: dict) -> str:
    from workflow.paths import IREE_CASE_LOG

    return IREE_CASE_LOG.format(sku=identity["sku"], workload=identity["workload"])


def _last_context(mpath: Path) -> str | None:
    """The context (the job's inputs) of the batch's last finished run; None if unknown."""
    try:
        return read_json(mpath).get("context")
    except (OSError, ValueError, AttributeError):
        return None


def _member_why(reused: bool, forced: bool, problem: str | None) -> str:
    """Why a member is reused or measured, for its line in the batch's log."""
    if reused:
        return "reused"
    if forced:
        return "measuring again: the rerun was forced"
    return "measuring" if problem == "not measured yet" else f"measuring again: {problem}"
