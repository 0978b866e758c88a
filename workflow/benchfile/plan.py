"""A selection's cases as the workflow plans them: their identities, record paths,
the modules a pipeline loads, their provenance, the pairs skipped with their reasons,
and (read back from a case's provenance) the goldens its file holds for it."""

from __future__ import annotations

from pathlib import Path

from workflow.benchfile.parse import load_file
from workflow.benchfile.select import BenchCase, Selection
from workflow.paths import BF_CASE


def identity(case: BenchCase) -> dict:
    f = case.file
    return {"id": case.id, "model": f.model, "config": f.config, "dtype": f.dtype(),
            "shape": f.shape(), "sku": case.sku, "backend": "iree", "recipe": "baseline",
            "mode": "inference", "workload": f.id, "layers": None}


def case_of(sel: Selection, sku: str, benchmark: str) -> BenchCase:
    return next(c for c in sel.cases if c.sku == sku and c.benchmark == benchmark)


def case_paths(sel: Selection | None) -> list[str]:
    """Case records of a suite's benchmark files, from attach.attach() (the report's
    further inputs)."""
    if sel is None:
        return []
    return [BF_CASE.format(sku=c.sku, benchmark=c.benchmark) for c in sel.cases]


def module_files(sel: Selection, sku: str, benchmark: str, pattern: str) -> list[str]:
    """The compiled modules (or their stage JSONs: `pattern` is BF_COMPILE_VMFB or
    BF_COMPILE_META) that a pipeline benchmark file loads before its own, on one SKU."""
    return [pattern.format(sku=sku, benchmark=m) for m in sel.module_ids(benchmark)]


def provenance(sel: Selection, sku: str, benchmark: str) -> dict:
    """Where a benchmark file's case comes from: the file, its golden key, its device, the
    MLIR and weights it was found with."""
    f = sel.file(benchmark)
    return {"benchmark_file": str(f.path), "golden_key": sel.golden_key(sku),
            "iree_device": f.data["device"],
            "compiled_file_name": f.data.get("compiled_file_name"),
            "mlir_file": str(f.mlir), "weights": [str(w) for w in sel.weights(benchmark)],
            **({"torch_models": f.kind} if hasattr(f, "run_extra") else {})}


def skipped_plan(sel: Selection | None) -> list[dict]:
    """The (file, SKU) pairs that cannot run here, with their reasons: recorded as
    skipped cases by the report step (never dropped, never a missing input)."""
    if sel is None:
        return []
    return [{"identity": identity(case), "reason": why,
             "provenance": {"benchmark_file": str(case.file.path),
                            "golden_key": sel.golden_key(case.sku),
                            "iree_device": case.file.data["device"],
                            **({"torch_models": case.file.kind}
                               if hasattr(case.file, "run_extra") else {})}}
            for case, (_, _, why) in zip(sel.skipped_cases(), sel.skipped, strict=True)]


def case_records(sel: Selection | None) -> list[dict]:
    """The report step's entries of the selection's cases: each record's path, its
    identity, and that it was judged in its own case step (the record makes it again)."""
    out = []
    for c in sel.cases if sel is not None else ():
        path = BF_CASE.format(sku=c.sku, benchmark=c.benchmark)
        out.append({"record": path, "identity": identity(c), "judge": False, "redo": path})
    return out


def cases_without_goldens(sel: Selection | None) -> list[str]:
    """The ids of the selection's cases whose benchmark file holds no goldens for their
    SKU: the gate judges those against the suite's goldens directory alone (a file's
    empty goldens are none: regression.goldens.ref_from_file_goldens)."""
    return [c.id for c in (sel.cases if sel is not None else ())
            if not file_goldens_of({"provenance": provenance(sel, c.sku, c.benchmark)})[0]]


def file_goldens_of(case: dict) -> tuple[dict | None, str | None]:
    """The goldens a case's benchmark file holds for it (cases from benchmark files, by
    their provenance), and the file; (None, None) for other cases."""
    prov = case.get("provenance") or {}
    path, key = prov.get("benchmark_file"), prov.get("golden_key")
    if not path or not Path(path).exists():
        return None, None
    if prov.get("torch_models"):
        from workflow.benchfile.torch_models import load_test
        from workflow.benchfile.torch_plan import goldens_of

        return goldens_of(load_test(path)), path
    return load_file(path).goldens(key), path
