"""Export stage (runs in a child process): torch.export, MLIR through IREE's FX
importer, seeded inputs, fp32 eager reference outputs and aten op statistics.

    python -m workflow.backends.iree.export SPEC_JSON MLIR INPUTS_NPZ REFERENCE_NPZ META_JSON
"""

from __future__ import annotations

import json
import time
from collections import Counter

import numpy as np

from workflow.backends.proc import worker_main
from workflow.models.registry import get_model, load_model_files
from workflow.records.storage import atomic_writer, write_json


def make_buffers_persistent(module) -> int:
    """IREE's FX importer fails with "Could not find state mapping for buffer" on
    non-persistent buffers (BERT's position_ids): they are not in the exported
    state dict. Making them persistent puts them there; values are unchanged."""
    n = 0
    for sub in module.modules():
        n += len(sub._non_persistent_buffers_set)
        sub._non_persistent_buffers_set.clear()
    return n


def graph_stats(graph) -> dict:
    """aten op counts of an FX graph (torch.export's, so after decomposition to aten)."""
    hist = Counter(
        str(node.target) for node in graph.nodes if node.op == "call_function"
    )
    return {
        "aten_ops": sum(hist.values()),
        "aten_ops_unique": len(hist),
        "op_histogram": dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))),
        "graph_breaks": None,
    }


def tensor_leaves(out) -> list:
    import torch
    from torch.utils import _pytree

    return [x for x in _pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]


def to_numpy(t) -> np.ndarray:
    """bf16 has no numpy dtype: it is stored widened to f32 (exact) and narrowed back on use."""
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy()


def save_arrays(path: str, prefix: str, arrays: list, **extra) -> None:
    """Arrays as an .npz file (`prefix0`, `prefix1`, ... and `extra`), written atomically
    (records/storage.atomic_writer: WriteError on a full or read-only disk, no partial
    file). Through a file object, which numpy writes to as given (a path not ending in
    .npz would get the suffix added)."""
    with atomic_writer(path) as fh:
        np.savez(fh, **{f"{prefix}{i}": a for i, a in enumerate(arrays)}, **extra)


def export_workload(spec: dict, mlir_path: str, inputs_path: str, reference_path: str) -> dict:
    import torch
    from iree.compiler.extras.fx_importer import FxImporter

    load_model_files(spec.get("model_modules", []))
    model = get_model(spec["model"])
    t0 = time.monotonic()
    ref = model.build(spec["config"], "f32", spec["layers"], spec["shape"])
    with torch.no_grad():
        reference = tensor_leaves(ref.module(*ref.inputs))
    inst = ref if spec["dtype"] == "f32" else model.build(
        spec["config"], spec["dtype"], spec["layers"], spec["shape"])
    fixed = make_buffers_persistent(inst.module)
    prog = torch.export.export(inst.module, inst.inputs)
    importer = FxImporter()
    importer.import_frozen_program(prog, func_name="main")
    # Bytecode, not text: text MLIR prints every weight as hex (gigabytes for BERT-large).
    # Every output atomically: a full disk leaves no partial module for a later run to
    # take for an export, and fails the stage with `could not write PATH: REASON`.
    with atomic_writer(mlir_path) as fh:
        importer.module.operation.write_bytecode(fh)
    save_arrays(inputs_path, "arg", [to_numpy(x) for x in inst.inputs])
    save_arrays(reference_path, "out", [to_numpy(x) for x in reference])
    return {
        "graph": graph_stats(prog.graph),
        "inputs": [{"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")}
                   for x in inst.inputs],
        "outputs": [{"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")}
                    for x in reference],
        "flops": inst.flops,
        "parameters": int(sum(p.numel() for p in inst.module.parameters())),
        "buffers_made_persistent": fixed,
        "export_seconds": time.monotonic() - t0,
        "torch_version": torch.__version__,
    }


def main(argv: list[str]) -> None:
    spec_json, mlir, inputs, reference, meta = argv
    write_json(meta, export_workload(json.loads(spec_json), mlir, inputs, reference))


if __name__ == "__main__":
    worker_main(main)
