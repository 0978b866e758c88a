"""Content keys: what each stage's output depends on, by content, not by name.

A result is reused only when its key matches (DESIGN.md, "Content keys"):
- export: the export spec, the model's source files (registry.model_sources), benchflow's
  exporter, the torch build and the iree-base-compiler build (its FX importer writes
  the MLIR);
- an IREE case (compile, run, verify and the record): its export key, its identity, the
  SKU's settings but its description (and the opt-in of its compile flags), the builds
  of the SKU's compiler and benchmark tool and of iree.runtime (verify), the accuracy
  tolerances, whether the SKU's device is on the measuring machine, and for a SKU whose
  `target_chip` is `auto` the chip and GPU it resolved to there, and the automatic
  values as this machine resolves them (issue 47: the GPUs of `device: cuda`,
  `target_cpu: host`'s CPU model, local-task's CPUs where no group count is set), which
  are in its batch's content param too, resolved where the run is planned, so that
  Snakemake reruns the batch on another machine instead of answering "Nothing to be
  done". The MLIR and module bytes are not known before the job; the files a case was made from are
  fingerprinted when it is written and checked before it is reused (jobs/iree_batch.py);
- a torch batch: its plan, the model sources of its cases, the recipes' code, and the
  torch and torchao builds its interpreter imports (a SKU's `torch.python` included),
  and for `threads: 0` the CPUs this machine grants (for cuda workloads, its GPUs).

Each key is a digest of named parts, and the parts are kept beside the key, so a log can
say which part changed ("model sources changed: workflow/models/layers.py").
"""

from __future__ import annotations

import functools
import hashlib
import json
import os

from workflow.backends.builds import (
    interpreter_build,
    package_build,
    source_digest,
    tool_build,
)
from workflow.backends.iree import gpu_chip
from workflow.backends.iree.host_cpu import HOST, host_key
from workflow.measure.disturbance import granted_cpus
from workflow.models.registry import DTYPES, load_model_files, model_sources

# benchflow's own modules whose code shapes an artifact: the exporter writes the MLIR
# (with the modules it takes its FLOP count and its output check from, which shape the
# export's data; an export cache shared by several checkouts must not hand one out that
# other code made), the recipes quantize torch models. The measuring code is not among
# them (it decides how, not what, is measured): a change of protocol is announced, and
# --forcerun redoes.
EXPORTER = ("workflow.backends.iree.export", "workflow.models.flops",
            "workflow.models.outputs")
TORCH_RECIPES = ("workflow.backends.torch.recipes",)


def digest(parts) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def sources_of(spec: dict) -> dict[str, str]:
    """The source files of the model of an export spec (or a torch workload spec)."""
    load_model_files(spec.get("model_modules", []))
    return model_sources(spec["model"])


def _union_sources(specs: list[dict]) -> dict[str, str]:
    """The source files of every model of `specs`, each model asked once."""
    sources: dict[str, str] = {}
    models = {(s["model"], tuple(s.get("model_modules", []))): s for s in specs}
    for spec in models.values():
        sources.update(sources_of(spec))
    return dict(sorted(sources.items()))


def export_parts(spec: dict) -> dict:
    return {"spec": spec, "model sources": sources_of(spec),
            "exporter": source_digest(*EXPORTER), "torch": package_build("torch"),
            "fx importer": package_build("iree-base-compiler")}


def export_key(spec: dict) -> str:
    return digest(export_parts(spec))


def iree_tools(sku: dict) -> dict:
    """The builds of the tools that compile, time and verify a SKU's cases."""
    return {"compiler": tool_build(sku["iree"].get("compile_tool"), "iree-base-compiler"),
            "benchmark tool": tool_build(sku["iree"].get("benchmark_tool"),
                                         "iree-base-runtime"),
            "verify runtime": package_build("iree-base-runtime")}


# A SKU's keys that decide nothing its cases produce: the description is text for
# reports; `slurm` only places its jobs on a cluster (planning/resources.py), and moving
# them to another partition must not measure every case again.
NOT_SETTINGS = ("description", "slurm")


def sku_settings(sku: dict) -> dict:
    """A SKU's settings that decide what its cases produce: not NOT_SETTINGS, nor
    `iree.allow_any_compile_flags`, which only decides whether the suite is accepted
    (adding it must not measure every case again)."""
    out = {k: v for k, v in sku.items() if k not in NOT_SETTINGS}
    if "iree" in out:
        out["iree"] = {k: v for k, v in out["iree"].items() if k != "allow_any_compile_flags"}
    return out


def without_placement(sku: dict) -> dict:
    """The SKU as a job's params see it (run_torch's): all of it but its cluster
    placement, which reruns nothing."""
    return {k: v for k, v in sku.items() if k != "slurm"}


def dtype_tolerances(accuracy: dict) -> dict:
    """A suite's `accuracy` per dtype alone: all that judges an IREE case (baseline only),
    so that the quantized recipes' SQNR rules are no part of its key."""
    return {dtype: accuracy[dtype] for dtype in DTYPES}


@functools.lru_cache(maxsize=4)
def _listed_gpus(_path: str | None, _stand_in: str | None) -> tuple:
    """nvidia-smi's GPUs as (name, capability) pairs, asked once per process for a PATH
    and stand-in (gpu_chip.FAKE_GPUS_ENV): a suite plans every batch of an auto SKU with
    one answer, and a test that changes either gets a fresh one."""
    gpus, _why = gpu_chip.cuda_gpus()
    return tuple((g.name, g.capability_text) for g in gpus)


def cuda_gpus_here() -> list[list[str]]:
    """The NVIDIA GPUs this machine lists, [[name, capability], ...] (none: [])."""
    return [list(g) for g in _listed_gpus(os.environ.get("PATH"),
                                          os.environ.get(gpu_chip.FAKE_GPUS_ENV))]


def iree_automatic(sku: dict) -> dict:
    """What the SKU's automatic IREE settings are on this machine (issue 47): the GPUs
    `device: cuda` runs on, whichever are here (what `target_chip: auto` is chosen for:
    the chip follows from them and the compiler build, which the keys hold besides; a
    machine that gained or changed its GPU measures again), the CPU model `target_cpu:
    host` is resolved from (host_cpu.host_key), and the CPU count local-task's topology
    is drawn from when the SKU leaves task_topology_max_group_count unset. Empty for a
    CPU SKU that names each of them, whose keys are what they were."""
    iree, out = sku.get("iree") or {}, {}
    if iree.get("target_chip") == gpu_chip.AUTO_CHIP or iree.get("device") == "cuda":
        out["cuda gpus"] = cuda_gpus_here()
    if iree.get("target_backend") == "llvm-cpu" and iree.get("target_cpu") == HOST:
        out["target_cpu host"] = host_key(iree.get("compile_tool"))
    if iree.get("device") == "local-task" and not iree.get("task_topology_max_group_count"):
        out["task topology cpus"] = os.cpu_count()
    return out


def torch_automatic(sku: dict, devices: set[str] = frozenset()) -> dict:
    """What a torch SKU's automatic values are on this machine: for `threads: 0` the CPUs
    this process is granted (measure/disturbance.granted_cpus), which the run's first
    torch batch decides by too (jobs/torch.run_threads); for workloads on `devices`
    cuda, the GPUs here. Empty for a SKU naming its thread count on CPU workloads."""
    torch, out = sku.get("torch") or {}, {}
    if "threads" in torch and not torch["threads"]:
        out["torch threads 0"] = granted_cpus()
    if "cuda" in devices:
        out["cuda gpus"] = cuda_gpus_here()
    return out


def case_parts(case: dict, sku: dict, tolerances: dict, device_here: bool,
               target_chip: dict | None = None) -> dict:
    """The parts of an IREE case's key; `case` is a batch plan entry (spec, identity).
    `sku` is the SKU as it is compiled for, its `target_chip: auto` resolved on this
    machine; `target_chip` is that choice (gpu_chip.ChipChoice.key: the chip and the GPU it
    was chosen for), so that one suite measured on two GPUs given one chip (an L40 and
    an H100 both get sm_89 from iree-compile 3.13) reuses neither's timings on the other,
    and a rerun on the same machine reuses its own. A SKU naming its chip has no such
    part, and keeps the key it had."""
    spec = case["spec"]
    parts = {"export": export_parts(spec), "identity": case["identity"],
             "sku settings": sku_settings(sku),
             "tools": iree_tools(sku), "tolerances": tolerances, "device here": device_here}
    if target_chip is not None:
        parts["target chip"] = target_chip
    automatic = iree_automatic(sku)
    if automatic:
        parts["automatic values"] = automatic
    return parts


def changed_parts(old: dict | None, new: dict) -> str:
    """What differs between two parts dicts, in words: the part names, and for model
    sources the files ("model sources changed: my_model.py")."""
    if not old:
        return "no earlier key"
    out = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict) and name == "export":
            out.append(changed_parts(a, b))
        elif name == "model sources" and isinstance(a, dict) and isinstance(b, dict):
            files = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
            out.append(f"model sources changed: {', '.join(files)}")
        else:
            out.append(f"{name} changed")
    return "; ".join(out) or "nothing"


def iree_batch_content(specs: list[dict], sku: dict) -> dict:
    """An IREE batch job's content param: the model sources of its cases and the builds of
    the tools they go through. Snakemake reruns the batch when one changes and
    `snakemake -n` prints the before and now of this dict; the job then re-measures only
    the cases whose own key changed."""
    automatic = iree_automatic(sku)
    return {"model sources": _union_sources(specs),
            "exporter": source_digest(*EXPORTER), "torch": package_build("torch"),
            "fx importer": package_build("iree-base-compiler"), **iree_tools(sku),
            # Resolved here, where the run is planned, so that Snakemake reruns the batch
            # on a machine where they differ; the batch's cases are keyed by them too.
            **({"automatic values": automatic} if automatic else {})}


def torch_batch_content(workloads: list[dict], sku: dict) -> dict:
    """A torch batch job's content param: its cases' model sources, the recipes' code and
    the torch / torchao builds of the interpreter that runs its workers."""
    automatic = torch_automatic(sku, {w.get("device") for w in workloads})
    return {"model sources": _union_sources(workloads),
            "recipes": source_digest(*TORCH_RECIPES),
            **interpreter_build((sku.get("torch") or {}).get("python")),
            **({"automatic values": automatic} if automatic else {})}
