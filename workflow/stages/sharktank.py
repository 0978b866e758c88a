"""Stages of sharktank-format benchmark files: run and case (compile is
stages.compile_module with the file's flags). Failures are data, as in stages.py."""

from __future__ import annotations

from workflow.backends.iree import tools as iree
from workflow.backends.proc import tool_path
from workflow.records.case import (
    CaseRecord,
    Compile,
    Golden,
    Memory,
    Throughput,
    Timing,
    _pick,
    case_provenance,
)
from workflow.records.storage import read_json, write_json
from workflow.stages import iree as stages


def run_benchmark_file(*, vmfb: str, compile_meta: str, spec: dict, sku: dict, timeout: float,
                       timing: str, log: str, modules: list[str] = (),
                       module_metas: list[str] = ()) -> dict:
    """Times a benchmark file's module with its function, inputs, weights and flags,
    under the measurement protocol of the SKU (stages.measure)."""
    # The file says which device it runs on; the SKU how many workers local-task has.
    run_sku = {**sku, "iree": {**sku["iree"], "device": spec["device"]}}

    def body():
        tool = tool_path("iree-benchmark-module")
        extra = [*spec["parameters"], *spec["benchmark_flags"]]
        out = stages.measure(
            lambda **kw: iree.benchmark_argv(tool, vmfb, spec["function"], spec["inputs"],
                                             run_sku, modules=list(modules), extra_flags=extra,
                                             **kw),
            spec["measurement"], timeout, log)
        return {**out, "device": spec["device"]}

    # A module this one loads failing to compile fails this case too, with its error.
    return stages.run_stage("run", timing, [], [compile_meta, *module_metas], body, log)


def build_case(identity: dict, sku: dict, compiled: dict, run: dict, provenance: dict
               ) -> CaseRecord:
    failed = next((s for s in (compiled, run) if s["status"] != "ok"), None)
    rec = CaseRecord(
        **identity,
        status="failed" if failed else "ok",
        stage=failed["failed_stage"] if failed else None,
        error=failed["error"] if failed else None,
        provenance={**case_provenance(run, sku), "started_at": compiled.get("started_at"),
                    **provenance},
    )
    if compiled["status"] == "ok":
        rec.compile = _pick(Compile, compiled)
    if run["status"] == "ok":
        rec.timing = _pick(Timing, run["timing"])
        rec.memory = _pick(Memory, run.get("memory"))
        median_s = rec.timing.median_ms / 1e3
        rec.throughput = Throughput(items_per_s=1.0 / median_s if median_s else None)
    return rec


def case_benchmark_file(*, identity: dict, sku: dict, compiled: str, run: str, case: str,
                        provenance: dict, file_goldens: dict, gate: dict,
                        goldens: str | list | None = None) -> dict:
    """The case record of a benchmark file on a SKU, judged against the SKU's golden
    file when it has an entry, else against the file's own goldens."""
    from workflow.regression.gate import golden_section

    rec = build_case(identity, sku, read_json(compiled), read_json(run), provenance)
    rec.golden = Golden(**golden_section(rec.to_dict(), goldens, gate, file_goldens,
                                         provenance["benchmark_file"]))
    data = rec.to_dict()
    write_json(case, data)
    return data
