"""What a case's measurement was made of, as a golden keeps it and `check` compares it.

Two measurements of the same identity time the same thing: the same program (an IREE
case's export without its debug locations, which a renamed variable moves; a torch
case's model sources by digest), the same inputs, flags and tool releases, under the
same measurement configuration (records/measurement_config.py). A difference between
their times is then the machine's, not the code's. An identity holds no path: a suite
moved to another directory, or a results directory read from elsewhere, keeps it.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workflow.backends.proc import run_tool, tool_path
from workflow.comparisons.ab_torch import torch_side
from workflow.errors import ConfigError, StageError
from workflow.records import measurement_config
from workflow.records.stage import StageResult
from workflow.records.storage import file_sha256, read_json


class NotKept(Exception):
    """Why a case has no baseline to keep or to compare (the message says so)."""


@dataclass
class Made:
    """A case as made in one run: its identity, the files that measure it again (role ->
    path: an IREE module and inputs; a torch case's model files by name) and the side a
    pair measures (JSON: the SKU's settings, dtypes, flags; a torch pair's side)."""

    identity: dict
    files: dict[str, Path] = field(default_factory=dict)
    side: dict = field(default_factory=dict)


def results_root(report_path: str | Path) -> Path:
    """The run's working directory: the one that holds results/report.json."""
    return Path(report_path).resolve().parent.parent


def program_digest(mlir: str | Path) -> str | None:
    """SHA-256 of an exported program re-emitted by iree-opt --strip-debuginfo: the
    source lines a rename moves are in its debug locations (and in the compiled module),
    never in what runs. None when iree-opt cannot read it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "stripped.mlirbc"
        try:
            run_tool([tool_path("iree-opt"), "--strip-debuginfo", "--emit-bytecode",
                      str(mlir), "-o", str(out)], stage="baseline", timeout=600)
        except StageError:
            return None
        return file_sha256(out)


def inputs_digest(npz: str | Path) -> str:
    """SHA-256 of an inputs.npz's arrays (names, dtypes, shapes and bytes, by name), not
    of the file: the zip container's own bytes may differ for equal arrays."""
    h = hashlib.sha256()
    with np.load(npz) as data:
        for name in sorted(data.files):
            a = np.ascontiguousarray(data[name])
            h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
            h.update(a.tobytes())
    return h.hexdigest()


def load_suite(report: dict):
    """The suite a report was run from (its provenance's config_source, as its files
    are now); NotKept when it cannot be loaded."""
    from workflow.suite.load import load

    source = (report.get("provenance") or {}).get("config_source") or ""
    paths = [p for p in source.split(", ") if p]
    if not paths:
        raise NotKept("the report names no suite file (provenance.config_source)")
    try:
        return load(paths)
    except (ConfigError, OSError) as exc:
        why = " ".join(exc.problems) if isinstance(exc, ConfigError) else str(exc)
        raise NotKept(f"its suite {source} does not load now: {why}") from None


def made(case: dict, report: dict, root: Path, suite) -> Made:
    """The case as made in the run under `root`, from the suite it ran from; NotKept for
    a case whose baseline cannot be kept (a benchmark file's, or its files are gone)."""
    prov = case.get("provenance") or {}
    if prov.get("benchmark_file") or prov.get("torch_models"):
        raise NotKept("a benchmark file's case is judged against its file's own runner "
                      "settings and goldens, which keep no module")
    if suite is None:
        raise NotKept("its suite could not be loaded")
    made_ = _iree(case, root, suite) if case.get("backend") == "iree" else \
        _torch(case, report, suite)
    # The machine's automatic values (target_cpu host, threads 0) are resolved on its
    # CPU: the same flags on another CPU model build and time something else.
    host = (report.get("provenance") or {}).get("host") or {}
    made_.identity["host"] = {k: host.get(k) for k in ("cpu_model", "cores", "machine")}
    return made_


def _need(path: Path) -> Path:
    if not path.is_file():
        raise NotKept(f"{path} is absent (the run's results/ were cleaned or moved)")
    return path


def _iree(case: dict, root: Path, suite) -> Made:
    from workflow.paths import (
        COMPILE_VMFB,
        EXPORT_INPUTS,
        EXPORT_META,
        EXPORT_MLIR,
        IREE_BASELINE_RUN_TIMING,
    )

    wl, sku = case["workload"], case["sku"]
    vmfb = _need(root / COMPILE_VMFB.format(sku=sku, workload=wl))
    inputs = _need(root / EXPORT_INPUTS.format(workload=wl))
    meta = _need(root / EXPORT_META.format(workload=wl))
    mlir = _need(root / EXPORT_MLIR.format(workload=wl))
    run = _need(root / IREE_BASELINE_RUN_TIMING.format(sku=sku, workload=wl))
    try:
        command = StageResult.read(str(run)).data.get("command") or []
        dtypes = [i["dtype"] for i in read_json(meta)["inputs"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NotKept(f"{run} or {meta} cannot be read: {exc}") from None
    if sku not in suite.config["skus"]:
        raise NotKept(f"its SKU {sku!r} is not in the suite now")
    comp, prov = case.get("compile") or {}, case.get("provenance") or {}
    tools = {"compiler": comp.get("compiler_version"),
             "runtime": prov.get("iree_runtime_version")}
    identity = {
        "kind": "iree",
        # The module itself where iree-opt cannot re-emit the program: stricter (a
        # rename then counts as a change, and is measured), never looser.
        "program": program_digest(mlir) or f"module {file_sha256(vmfb)}",
        "inputs": inputs_digest(inputs),
        "compile_flags": comp.get("flags"),
        "tools": tools,
        # The run's arguments less the files: its device, repetitions and timing flags.
        "run_args": [a for a in command[1:] if not a.startswith(("--module=", "--input="))],
        "measurement_config": measurement_config.of_case(case),
    }
    side = {"identity": {"sku": sku, "workload": wl}, "sku": suite.sku(sku),
            "dtypes": dtypes, "compile_flags": comp.get("flags"),
            "parts": {"tools": tools}, "model_sources": prov.get("model_sources") or {}}
    return Made(identity, {"module": vmfb, "inputs": inputs}, side)


def _torch(case: dict, report: dict, suite) -> Made:
    found = [c for c in suite.cases if c.id == case["id"]]
    if not found:
        raise NotKept("not a case of its suite now")
    side = torch_side(suite, found[0], "golden")
    workload = dict(side["case"]["workload"])
    modules = [Path(m) for m in workload.pop("model_modules", [])]
    versions = (report.get("provenance") or {}).get("versions") or {}
    sources = (case.get("provenance") or {}).get("model_sources") or {}
    identity = {
        "kind": "torch",
        "workload": workload,
        "recipe": side["case"]["recipe"],
        "backend": side["backend"],
        "sku": {k: v for k, v in side["sku"].items() if k != "measurement"},
        # By content only: the files' paths move with the suite, their bytes do not.
        "sources": sorted(sources.values()),
        "versions": {k: versions.get(k) for k in ("torch", "torchao")},
        "measurement_config": measurement_config.of_case(case),
    }
    names = [m.name for m in modules]
    if len(set(names)) != len(names):
        raise NotKept(f"its model files share a name ({', '.join(names)}): a stored copy "
                      "is kept by its file name")
    files = {m.name: _need(m) for m in modules}
    return Made(identity, files, {**side, "model_modules": names, "sources": sources})
