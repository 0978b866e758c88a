"""Another snakemake already working in this run's directory, told before this one builds
its DAG (the Snakefile calls `other_run_refusal`).

Snakemake itself tells the second run nothing of the first: started while the first
builds its DAG it says `LockException: Directory cannot be locked` and advises --unlock;
started once the first runs a job, it finds that job's outputs marked incomplete and
says `IncompleteFilesException ... rerun your command with the --rerun-incomplete flag`,
advice that, taken, deletes the outputs the first run is making (and then meets the
lock). So a run refuses in one line naming the other: its PID, since when it runs and
its command, and what to do (wait for it, or stop it).

Which processes are that run: this user's processes (another's cannot be read, and
could not hold this user's directory) whose working directory is this one and whose
command is snakemake's (`snakemake ...`, `python -m snakemake ...`), started before
this one (of two started together, the later one refuses, so one goes on), not one of
this process's ancestors, and neither a dry run (it takes no lock and marks nothing
incomplete) nor a job process Snakemake starts itself (`--target-jobs`: its own
snakemake is the run). A dry run is never refused: it plans beside a running one. A
run on another machine sharing the directory cannot be seen here; Snakemake's lock
still refuses it, in its own words. psutil is Snakemake's own dependency.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

# The refusal's words; `benchflow run` waits and retries on seeing them, as on
# Snakemake's own LockException (commands/single_run.py).
OTHER_RUN = "another snakemake is running in"
# Arguments of a snakemake that holds no lock and marks nothing incomplete.
_HOLDS_NOTHING = {"-n", "--dry-run", "--dryrun", "--dry_run", "--unlock", "--list",
                  "-l", "--list-rules", "--summary", "-S", "--detailed-summary", "-D",
                  "--version", "-v", "--help", "-h", "--target-jobs"}
# Short flags given together (`-np`): Snakemake's single-letter options, no value.
_SHORT_FLAGS = re.compile(r"-[A-Za-z]{2,}")
_COMMAND_CHARS = 120


@dataclass(frozen=True)
class OtherRun:
    pid: int
    started: float     # time.time() when it started
    command: list[str]


def is_snakemake(argv: list[str]) -> bool:
    """A snakemake command line (`snakemake ...`, `python -m snakemake ...`,
    `python .../snakemake ...`) of a run that may hold the directory."""
    if not argv:
        return False
    names = [Path(a).name for a in argv[:2]]
    main = ("snakemake" in names
            or any(a == "-m" and b == "snakemake" for a, b in zip(argv, argv[1:], strict=False))
            or any(a.endswith("snakemake/__main__.py") for a in argv[:2]))
    return main and holds_directory(argv)


def holds_directory(argv: list[str]) -> bool:
    """Whether a snakemake command line locks its directory and marks outputs incomplete:
    not a dry run (`-n`, also among short flags, `-np`), nor --unlock, a listing, a
    summary, its version or help, nor a job Snakemake starts (`--target-jobs`)."""
    return not (_HOLDS_NOTHING.intersection(argv)
                or any(_SHORT_FLAGS.fullmatch(a) and "n" in a for a in argv))


def other_runs(directory: str | Path, me: int | None = None) -> list[OtherRun]:
    """The snakemake runs working in `directory` that started before process `me` (this
    one), oldest first; [] where the processes cannot be listed."""
    import psutil

    here = os.path.realpath(directory)
    try:
        this = psutil.Process(me or os.getpid())
        mine = {this.pid, *(p.pid for p in this.parents())}
        since = this.create_time()
        found = []
        for p in psutil.process_iter(["pid", "cmdline", "create_time", "cwd"]):
            info = p.info
            if info["pid"] in mine or not info["cwd"] or not info["create_time"]:
                continue  # ours, or another user's (AccessDenied leaves them None)
            if os.path.realpath(info["cwd"]) != here or not is_snakemake(info["cmdline"] or []):
                continue
            if (info["create_time"], info["pid"]) < (since, this.pid):
                found.append(OtherRun(info["pid"], info["create_time"], info["cmdline"]))
    except (psutil.Error, OSError):
        return []
    return sorted(found, key=lambda r: r.started)


def refusal_line(directory: str | Path, run: OtherRun, now: float | None = None) -> str:
    """The one line a run refuses with while `run` works in `directory`."""
    from workflow.render.text import printable

    when = datetime.fromtimestamp(run.started).astimezone()
    ago = max(0, round((now if now is not None else time.time()) - run.started))
    command = " ".join(run.command)
    if len(command) > _COMMAND_CHARS:
        command = command[:_COMMAND_CHARS - 1] + "…"
    return printable(
        f"benchflow: {OTHER_RUN} {directory}: PID {run.pid}, since "
        f"{when:%Y-%m-%d %H:%M:%S %Z} ({ago} s ago): {command}; this run started nothing "
        f"there: run it again once PID {run.pid} has ended (or stop that run first)")


def other_run_refusal(directory: str | Path, argv: list[str]) -> str | None:
    """The refusal line when another snakemake works in `directory`, else None; none for
    a run (`argv`, its command line) that would not disturb it: a dry run plans beside a
    running one as it would alone."""
    if not holds_directory(argv):
        return None
    runs = other_runs(directory)
    return refusal_line(directory, runs[0]) if runs else None
