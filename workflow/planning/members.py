"""What a batch job keeps of its members beside its output, where Snakemake does not
delete it (`{batch}.members.json`): per case the fingerprints of the files it is made of
(and, for IREE cases, its key, parts, status), plus the batch's repair note.

The Snakefile checks those fingerprints for every finished batch before it plans
(planning/plan.verify_batches): Snakemake itself sees only a batch's output, and does not
rerun a job for a changed or missing intermediate file while the report is up to date.
A batch with a member that no longer verifies gets a new repair note, a param of its
job, and so reruns once.
"""

from __future__ import annotations

from pathlib import Path

from workflow.records.storage import fingerprint, fingerprint_problem, read_json, write_json


def read_members(path: str | Path) -> dict:
    """A batch's members file ({case id: member_entry}); {} when absent or unreadable (an
    older format, a cut-short file): then every member is measured again."""
    try:
        doc = read_json(path)
    except (OSError, ValueError):
        return {}
    members = doc.get("members") if isinstance(doc, dict) else None
    return members if isinstance(members, dict) else {}


def members_path(batch: str | Path) -> Path:
    return Path(batch).with_suffix(".members.json")


def repair_note(batch: str | Path) -> str | None:
    """The batch's repair note: set when the Snakefile found a member damaged, kept by the
    job. A param of the batch job, so a new note reruns the batch once: the job keeps
    the note as it is, so the next plan sees the param it ran with and reruns nothing."""
    try:
        doc = read_json(members_path(batch))
    except (OSError, ValueError):
        return None
    note = doc.get("repair") if isinstance(doc, dict) else None
    return note if isinstance(note, str) else None


def mark_repair(batch: str | Path, damaged: list[tuple[str, str]]) -> None:
    """Gives the batch a new repair note naming its damaged members."""
    path = members_path(batch)
    doc = read_json(path)
    count = int((doc.get("repair") or "0").split(":", 1)[0] or 0) + 1
    doc["repair"] = f"{count}: " + "; ".join(f"{case_id}: {why}" for case_id, why in damaged)
    write_json(path, doc)


def damaged_members(batch: str | Path, case_ids: list[str]) -> list[tuple[str, str]]:
    """(case id, why) of the finished members of a batch whose files no longer verify
    (quick check: size and mtime, then hashing what changed)."""
    members = read_members(members_path(batch))
    out = []
    for case_id in case_ids:
        entry = members.get(case_id)
        if not entry:
            continue  # a new member: the batch's plan changed, Snakemake reruns it anyway
        # The key is the job's business (it needs the device probe); here only the files.
        for path, fp in (entry.get("files") or {}).items():
            problem = fingerprint_problem(path, fp, quick=True)
            if problem:
                out.append((case_id, f"{path}: {problem}"))
                break
    return out


def write_files_members(batch: str | Path, records: dict[str, str]) -> None:
    """The members file of a batch whose members are only their records ({case id: record
    path}: a torch batch, re-measured whole), keeping the repair note it ran with."""
    write_json(members_path(batch), {
        "members": {cid: {"files": {path: fingerprint(path)}} for cid, path in records.items()},
        "repair": repair_note(batch)})
