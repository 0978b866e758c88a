"""A torch batch's journal: each case's record written, atomically, the moment its worker
has measured it, in `{batch}.measured/` beside the batch directory.

The batch directory is the job's declared output, and Snakemake deletes it when the job
fails or is stopped (a SLURM time limit's SIGTERM then SIGKILL, Ctrl-C, a crash) and
again before the job reruns; a stopped batch kept nothing (on an H100, torch.compile's
max-autotune spent 140 s on one case and the whole batch was lost). The journal is no
output of any rule, so it outlives a failed job: the rerun reuses every case whose
entry verifies (its key is the case's key now, its record is the case's) and measures
only the others. A finished batch assembles its outputs from the journal and its
worker's results, then removes the journal: a forced or changed batch measures again.
A case the batch was measuring when it was stopped gets an entry saying so (`stopped`:
its phase and seconds), never reused: the rerun measures it.

A finished batch leaves its cases' entries in the SKU's store, `measured/` beside its
batches (no rule's output either), before it removes its journal. So a case that moves
to another batch (the batches cut again: a workload added, another count of timing
slots, another torch_batch_size) is reused there, as are the cases of a batch that
reruns because another case of it changed: a case is measured again only where its own
key changed, or the run was forced. A case's key holds its own share of the batch's
content (its model's sources, not the batch's other models'), so that the batch it is
in does not change it. A stopped batch's journal is read by the SKU's other batches too.
A record naming profiler files (profile.trace) is not stored: its files are its
batch's, which a rerun replaces, and such a case is measured again when it moves.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from workflow.paths import torch_case_record
from workflow.planning import keys
from workflow.records.storage import read_json, seal, sealed, write_json
from workflow.stats.enums import Status

SUFFIX = ".measured"
# The SKU's store, beside its batches (whose names are b<digits>: Snakefile).
STORE = "measured"

# What a case is doing, by the worker's phase names (measure/cost.py's, the record's
# `cost` keys), for the line that names a stopped case.
PHASE_WORDS = {None: "starting its next step", "accuracy_s": "checking accuracy",
               "build_s": "building the model", "quantize_s": "quantizing",
               "compile_s": "compiling (torch.compile)", "first_call_s": "making its first call",
               "profile_s": "profiling", "invocations_s": "timing its invocations",
               "graph_s": "reading its graph"}

# The signal a job script ends by (jobs/job.py: 128 + its number) in words.
STOPPED_BY = {130: "Ctrl-C (SIGINT)",
              143: "SIGTERM (a time limit reached, or the job cancelled)"}


def journal_dir(batch_dir: str | Path) -> Path:
    return Path(f"{os.path.normpath(batch_dir)}{SUFFIX}")


def case_key(case: dict, backend: dict, sku: dict, tolerances: dict,
             content: dict | None) -> str:
    """A torch case's key: its plan entry (identity, workload, backend and recipe names),
    its backend's settings, the SKU's (threads decided), the tolerances and its share
    of the batch's content (case_content: its model's sources, the recipes' code, torch
    builds). Timeouts are not in it: a failure's are checked apart (Journal.reusable)."""
    return keys.digest({"case": case, "backend": backend, "sku": sku,
                        "tolerances": tolerances, "content": case_content(content, case)})


def case_content(content: dict | None, case: dict) -> dict | None:
    """What of the batch's content param (planning/keys.torch_batch_content) the case is
    made from: the sources of its own model, the GPUs only where it runs on cuda."""
    if not content:
        return content
    workload = case["workload"]
    own = dict(content)
    if isinstance(own.get("model sources"), dict):
        files = set(keys.sources_of(workload))
        own["model sources"] = {f: d for f, d in own["model sources"].items() if f in files}
    automatic = own.get("automatic values")
    if isinstance(automatic, dict) and workload.get("device") != "cuda":
        automatic = {k: v for k, v in automatic.items() if k != "cuda gpus"}
        own["automatic values"] = automatic
        if not automatic:
            del own["automatic values"]
    return own


def names_files(record: dict) -> bool:
    """Whether the record points at profiler files (its batch's artifacts)."""
    profile = record.get("profile")
    return isinstance(profile, dict) and any(isinstance(v, str) for v in profile.values())


class Journal:
    """The journal of the batch whose output is `batch_dir` (`into`: another directory
    of entries, the SKU's store or another batch's journal: others)."""

    def __init__(self, batch_dir: str | Path, into: Path | None = None):
        self.dir = journal_dir(batch_dir) if into is None else into

    def others(self) -> list[Journal]:
        """Where the SKU's other batches leave their cases: the SKU's store, then the
        journals of its other batches (stopped ones; a finished one removed its own)."""
        sku_dir = self.dir.parent
        found = [Journal(sku_dir, sku_dir / STORE)]
        if sku_dir.is_dir():
            found += [Journal(sku_dir, d) for d in sorted(sku_dir.glob(f"b*{SUFFIX}"))
                      if d.is_dir() and d != self.dir]
        return found

    @property
    def artifacts(self) -> Path:
        """Where the worker writes its profiler files: they outlive a stopped job too."""
        return self.dir / "artifacts"

    def path(self, identity: dict) -> Path:
        return Path(torch_case_record(str(self.dir), identity))

    def keep(self, identity: dict, key: str, record: dict, timeouts: dict) -> None:
        """A case's record, as soon as it is measured (atomically: storage.write_json)."""
        entry = {"key": key, "timeouts": timeouts, "record": record}
        write_json(self.path(identity), {**entry, "digest": seal(entry)})

    def stopped(self, identity: dict, key: str, why: str) -> None:
        """The case the batch was measuring when it was stopped: why, never reused."""
        write_json(self.path(identity), {"key": key, "stopped": why})

    def reusable(self, identity: dict, key: str, timeouts: dict) -> tuple[dict | None, str]:
        """The case's record kept by an earlier, stopped run of the batch, or None, and
        why in words for the batch's log. Read back and checked by content: the entry's
        key must be the case's key now, its record the case's own and its digest its
        bytes' (a file copied from another case's place, cut short or edited, a median
        changed by hand with its key kept, is measured again)."""
        path = self.path(identity)
        if not path.exists():
            return None, "not measured yet"
        try:
            entry = read_json(path)
        except (OSError, ValueError) as exc:
            return None, f"{path}: unreadable ({exc})"
        if not isinstance(entry, dict):
            return None, f"{path}: not a journal entry"
        if entry.get("stopped"):
            return None, f"the last run was {entry['stopped']}"
        if not sealed(entry):
            return None, f"{path}: edited or damaged (its digest does not match)"
        if entry.get("key") != key:
            return None, "its inputs changed since the last run measured it"
        record = entry.get("record")
        if not isinstance(record, dict) or record.get("id") != identity["id"]:
            return None, f"{path}: not the record of {identity['id']}"
        if record.get("status") == Status.FAILED and entry.get("timeouts") != timeouts:
            return None, "it failed, and the timeouts changed since"
        return record, f"reused: measured by the last run, which was stopped ({path})"

    def move_artifacts(self, into: Path, records: list[dict], out: Path) -> None:
        """The profiler files into `into/artifacts` (the batch directory being made),
        and the records' paths to them with them, as they will be in `out/artifacts`."""
        if not self.artifacts.is_dir():
            return
        dest = into / "artifacts"
        dest.mkdir(parents=True, exist_ok=True)
        for item in self.artifacts.iterdir():
            os.replace(item, dest / item.name)
        old, new = str(self.artifacts), str(out / "artifacts")
        for record in records:
            profile = record.get("profile")
            if isinstance(profile, dict):
                for name, value in profile.items():
                    if isinstance(value, str) and value.startswith(old + os.sep):
                        profile[name] = new + value[len(old):]

    def clear(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def stopped_line(code: object, seconds: float, phase: str | None) -> str:
    """What a case stopped from outside was doing: `stopped by SIGTERM (a time limit
    reached, or the job cancelled) after 140 s while compiling (torch.compile)`."""
    by = STOPPED_BY.get(code, f"the job's end (exit {code})") \
        if isinstance(code, int) else "the job's end"
    return (f"stopped by {by} after {seconds:.0f} s while "
            f"{PHASE_WORDS.get(phase, phase)}")
