"""The case step: stage results -> one judged case record on disk. IREE case jobs
(jobs/iree.case_job) and sharktank benchmark-file cases come through here; torch cases
are assembled by their batch job. The report step judges IREE and torch cases again
(commands/report.py), with the same judge."""

from __future__ import annotations

from pathlib import Path

from workflow.records.case import assemble, case_provenance, section
from workflow.records.stage import StageResult
from workflow.records.storage import write_json
from workflow.regression.gate import golden_section


def write_case(*, case: str, identity: dict, sku: dict, stages: list[str],
               goldens: str | list | None, gate: dict | None, provenance: dict | None = None,
               file_goldens: dict | None = None, file_source: str | None = None,
               cost: dict | None = None) -> dict:
    """Assembles the case from its stage JSONs (in DAG order), judges it against the
    SKU's golden file (an input only when it exists) or the benchmark file's goldens,
    and writes it (with `cost`, its seconds per phase, where the job measured them)."""
    results = [StageResult.read(p) for p in stages]
    run = next((r for r in results if r.stage == "run"), None)
    prov = {**case_provenance(run.data if run else None, sku),
            "started_at": results[0].started_at, **(provenance or {})}
    data = assemble(identity, results, prov)
    data["golden"] = golden_section(data, goldens or None, gate, file_goldens, file_source)
    if cost is not None:
        data["cost"] = section("cost", cost)
    write_json(case, data)
    return data


def case_benchmark_file(*, identity: dict, sku: dict, compiled: str, run: str, case: str,
                        provenance: dict, file_goldens: dict, gate: dict,
                        goldens: str | list | None = None) -> dict:
    """A benchmark file on a SKU, judged against the SKU's golden file when it has an
    entry, else against the file's own goldens."""
    return write_case(case=case, identity=identity, sku=sku, stages=[compiled, run],
                      goldens=goldens, gate=gate, provenance=provenance,
                      file_goldens=file_goldens, file_source=str(Path(
                          provenance["benchmark_file"])))
