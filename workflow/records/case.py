"""The case record (DESIGN.md, "The case record"): built from the stage JSONs as a dict
that follows its one definition, workflow/schemas/report.schema.json ($defs/case).

This module restates none of it: a record's keys, and each section's, come in the order
of the schema's `properties`; a key not given is its `default` there, else null; a key a
stage gives that the schema does not name is dropped. Field names are a contract read
by tests, the CLI and users' scripts: add them to the schema, never rename.
"""

from __future__ import annotations

import copy
import os
import socket
from functools import cache
from typing import Any

from workflow.records import schemas
from workflow.records.measurement_config import settings_of_sku
from workflow.records.stage import NO_DEVICE, StageResult
from workflow.slots.claim import current as current_slot
from workflow.stats.enums import Status

SCHEMA_VERSION = "1.8"  # 1.1: compile-only cases, ci_level, stop_reason, mde_ratio;
# 1.2: accuracy.metric, min_sqnr_db, sqnr_reference (the rule that judged accuracy);
# kernels (per dispatch or op), provenance.model_sources (the model's files by digest);
# 1.3: cost (seconds per phase), timing.target_rel_width, target_source, rel_width,
# invocation_kind, stop_reason width-out-of-reach; 1.4: kernels.source nsys and mode
# cuda-kernels (a row per CUDA kernel, its launching op in `op`), graph.normalised (the
# aliasing ops dropped before IREE's import), provenance.target_chip (what auto chose);
# 1.5: provenance.measurement (the SKU's settings that change what an invocation
# measures), golden.config_differs (records/measurement_config.py); 1.6: golden.drift
# (the run's common drift taken out before the time was judged: stats/drift.py);
# 1.7: golden.basis, golden.machine_drift, golden.pair (a case decided by what changed
# since its golden: unchanged, paired with the kept baseline, or unpaired); 1.8:
# provenance.slot (the timing slot that measured: its GPU by index and UUID, its CPUs).


@cache
def _case_schema() -> dict:
    return schemas.load("report")["$defs"]["case"]


def _object(sub: dict) -> dict:
    """The object branch of a property that is an object or null."""
    return next((b for b in sub.get("oneOf", ()) if b.get("type") == "object"), sub)


def _fill(schema: dict, given: dict, what: str) -> dict:
    """`given` in the schema's key order, each key it lacks at its default (else null;
    a required key without a default must be given, as the stage's data must have it)."""
    out = {}
    required = schema.get("required", ())
    for name, sub in schema["properties"].items():
        if name in given:
            out[name] = given[name]
        elif "default" in sub:
            out[name] = copy.deepcopy(sub["default"])
            if out[name] == {} and "properties" in sub:  # speedup, golden: their defaults
                out[name] = _fill(sub, {}, name)
        elif name in required:
            raise TypeError(f"{what}: missing required {name!r}")
        else:
            out[name] = None
    return out


def section(name: str, data: dict | None) -> dict | None:
    """A record section (compile, timing, golden, ...) from a stage's dict, ignoring the
    stage's extra keys; None stays None."""
    if data is None:
        return None
    sub = _object(_case_schema()["properties"][name])
    return _fill(sub, {k: v for k, v in data.items() if k in sub["properties"]}, name)


def case_record(identity: dict, **fields: Any) -> dict:
    """A case record: the identity's fields, then `fields` (status, stage, error,
    sections, provenance, ...), every other key at its default. A deep copy: the record
    shares nothing with its inputs, so that changing one never changes the other."""
    names = _case_schema()["properties"]
    given = {k: identity[k] for k in IDENTITY if k in identity} | fields
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise TypeError(f"case record: not in the schema: {unknown}")
    return copy.deepcopy(_fill(_case_schema(), given, "case record"))


def slot_provenance() -> dict:
    """The timing slot that measured the case (which GPU, which CPUs), where the job
    claimed one: provenance only, never a key, as two GPUs of one model are one SKU."""
    slot = current_slot()
    return {"slot": slot} if slot else {}


def case_provenance(run: dict | None, sku: dict) -> dict:
    """What can differ from case to case: host, threads, load, the SLURM job."""
    prov: dict[str, Any] = {"host": socket.gethostname(),
                            "torch_threads": sku["torch"]["threads"],
                            "iree_device": sku["iree"]["device"],
                            "task_topology_max_group_count":
                                sku["iree"]["task_topology_max_group_count"],
                            "measurement": settings_of_sku(sku, "iree")}
    job = (run or {}).get("slurm_job_id") or os.environ.get("SLURM_JOB_ID")
    if job:
        prov["slurm_job_id"] = job
    prov.update(slot_provenance())
    if run and run.get("contexts"):
        prov["load_avg"] = [c.get("load_avg") for c in run["contexts"]]
        prov["cpu_scaling_enabled"] = run["contexts"][0].get("cpu_scaling_enabled")
        # The machine that measured, which on a cluster is not the one writing this.
        prov["host"] = run["contexts"][0].get("host_name") or prov["host"]
    if run and run.get("runtime_version"):
        prov["iree_runtime_version"] = run["runtime_version"]
    return prov


# Which sections of a case record each stage's data fills. IREE's compile stage data is
# the compile section itself; every other stage carries its sections by name.
SECTIONS = ("graph", "compile", "timing", "memory", "accuracy", "profile", "kernels", "cost")


# The sections a stage measures, which a stage not run (no-device) leaves unmeasured.
STAGE_SECTIONS = {"run": ("timing", "memory"), "verify": ("accuracy",)}


def _status(results: list[StageResult]) -> tuple[str, str | None, str | None]:
    """(status, stage, error) of a case from its stage results in DAG order. The first
    result that is neither ok nor no-device decides; else stages not run for want of a
    device after an ok compile make it compile-only (error: the first one's reason), and
    without an ok compile unsupported (the device is absent and nothing was compiled)."""
    first_bad = next((r for r in results if not r.ok and r.status != NO_DEVICE), None)
    if first_bad is not None:
        return first_bad.status, first_bad.failed_stage, first_bad.error
    absent = next((r for r in results if r.status == NO_DEVICE), None)
    if absent is None:
        return Status.OK, None, None
    if any(r.stage == "compile" and r.ok for r in results):
        return Status.COMPILE_ONLY, None, absent.error
    return Status.UNSUPPORTED, None, absent.error


def _not_measured(results: list[StageResult]) -> dict | None:
    """The sections of stages not run for want of a device, each with the reason."""
    out = None
    for r in results:
        if r.status == NO_DEVICE:
            out = out or {}
            for name in STAGE_SECTIONS.get(r.stage, ()):
                out.setdefault(name, {"status": Status.UNSUPPORTED,
                                      "reason": r.error or "no device"})
    return out


def assemble(identity: dict, results: list[StageResult], provenance: dict) -> dict:
    """The one case assembler (IREE, torch and sharktank-file cases): an identity plus
    stage results in DAG order. The first result that is not ok decides the status
    (stages not run for want of a device: compile-only, see _status); every section an ok
    stage measured is kept, so a case failed at verify still shows its timing, and the
    sections of stages not run say so with the reason (`not_measured`)."""
    status, stage, error = _status(results)
    sections: dict[str, dict | None] = {}
    flops = None
    for r in results:
        if not r.ok:
            continue
        if r.stage == "compile":
            sections["compile"] = section("compile", r.data)
        for name in SECTIONS:
            # A compile's kernels (its dispatch list, no times) only for a case that was
            # compiled only: a case that ran has its profile's, or none.
            if name == "kernels" and r.stage == "compile" and status != Status.COMPILE_ONLY:
                continue
            if r.data.get(name) is not None:
                sections[name] = section(name, r.data[name])
        flops = r.data.get("flops", flops)
    if sections.get("timing") is not None:
        sections["throughput"] = _throughput(sections["timing"]["median_ms"], flops)
    return case_record(identity, status=status, stage=stage, error=error,
                       provenance=provenance, not_measured=_not_measured(results), **sections)


# The fields of a case that its plan gives (its identity); the rest come from its stages.
IDENTITY = ("id", "model", "config", "dtype", "shape", "sku", "backend", "recipe", "mode",
            "workload", "layers", "device", "compile_mode", "group")


def _throughput(median_ms: float, flops: float | None) -> dict:
    median_s = median_ms / 1e3
    return section("throughput", {
        "items_per_s": 1.0 / median_s if median_s else None,
        "gflops": flops / median_s / 1e9 if flops and median_s else None})


# Keys of the torch worker's characterize result that go to a CUDA case's provenance.
TORCH_GPU_KEYS = ("gpu_name", "gpu_count", "gpu_memory_bytes")


def torch_provenance(sku: dict, char: dict) -> dict:
    """What can differ between torch cases: host, threads, the SLURM job, the GPU a CUDA
    case ran on (the worker's torch.cuda)."""
    return {"host": socket.gethostname(), "torch_threads": sku["torch"]["threads"],
            "measurement": settings_of_sku(sku, "torch"),
            **({"torch_threads_decided": sku["torch"]["threads_decided"]}
               if sku["torch"].get("threads_decided") else {}),
            **({"slurm_job_id": os.environ["SLURM_JOB_ID"]}
               if os.environ.get("SLURM_JOB_ID") else {}),
            **slot_provenance(),
            **{k: char[k] for k in TORCH_GPU_KEYS if char.get(k) is not None},
            # The worker's output passed the log's cap (jobs/torch._note_log_cut).
            **({"log_cut": char["log_cut"]} if char.get("log_cut") else {})}


def unsupported_case(identity: dict, reason: str) -> dict:
    """A case that cannot run (known while planning): recorded with its reason."""
    return case_record(identity, status=Status.UNSUPPORTED, stage=None, error=reason)


def skipped_case(identity: dict, reason: str, provenance: dict | None = None) -> dict:
    """A case that cannot run here (a benchmark file whose device, chip or files this
    machine lacks): recorded with its reason, as sharktank's runner skips it."""
    return case_record(identity, status=Status.SKIPPED, stage=None, error=reason,
                       provenance=dict(provenance or {}))
