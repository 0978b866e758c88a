"""Export stage (runs in a child process): torch.export, the program normalised for
IREE's FX importer (normalise), MLIR through that importer, seeded inputs, fp32 eager
reference outputs and aten op statistics.

    python -m workflow.backends.iree.export SPEC_JSON MLIR INPUTS_NPZ REFERENCE_NPZ META_JSON
"""

from __future__ import annotations

import json
import time
from collections import Counter

import numpy as np

from workflow.backends.worker_side import worker_main
from workflow.models.flops import counted_forward
from workflow.models.outputs import checked_outputs
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


# Normalisation (issue 35): torch.export.export returns the training IR since torch 2.6,
# not functionalised, so it may keep in-place and aliasing ops whose form changes from
# one torch release to the next. torch 2.11 left `aten.detach_` in bert-tiny's graph (on
# the copy of a constant made in forward), which the importer emits as an unregistered
# `torch.operator` that iree-compile refuses ("failed to legalize operation
# 'torch.operator'"). torch 2.13 does not in bert-tiny, but still does wherever forward
# makes a tensor of a Python number (torch.tensor(-0.25): lift_fresh_copy, detach_).
# `normalise` makes the graph the same kind of thing whatever torch made it:
# run_decompositions functionalises it (detach_ goes) and decomposes the few ops the
# importer has no op for, then the value-preserving aliasing ops it keeps (detach,
# alias) are dropped. It lives here, not in a module of its own, so that the exporter's
# content key (planning/keys.EXPORTER: this file's digest) changes with it.


def iree_decompositions() -> dict:
    """The decomposition table given to run_decompositions: the entries of IREE's own
    PyTorch frontend's default list (iree-turbine's aot export, which prepares programs
    for this importer so) whose op the torch dialect of iree-compile 3.13 has no op for
    (the importer would emit them as torch.operator, which iree-compile refuses).
    Nothing else: an op not listed is kept as torch exported it. The core ATen table,
    run_decompositions' default, would break up aten.linear and
    scaled_dot_product_attention, which the importer lowers to IREE's own matmul and
    attention ops; the frontend's whole list turned gpt2-tiny's four addmm into mm, two
    multiplications by 1 and an add (67 ops to 77). Either would change what IREE is
    measured on, where functionalisation (any table) is all that torch 2.11's detach_
    needs."""
    import torch
    from torch._decomp import get_decompositions

    aten = torch.ops.aten
    return get_decompositions([
        # Batch norm: torch's functionalisation of an eval-mode BatchNorm leaves the
        # mutating _native_batch_norm_legit, and fails on it, unless it is decomposed.
        aten._native_batch_norm_legit, aten._native_batch_norm_legit_functional,
        aten._native_batch_norm_legit_no_training,
        aten.squeeze.dims, aten._unsafe_index.Tensor, aten.index_copy,
    ])


def no_op_aliases() -> frozenset:
    """Ops whose output has its input's values, shape and dtype, and which mean nothing
    in an inference graph, so that a use of the output may take the input instead:
    detach (a new tensor sharing the input's data, cut from autograd, which an
    exported inference program does not run), detach_ (the same, done in place: it
    returns its input), alias (a view of the whole input). Each is a no-op of
    torch.export's graphs: torch 2.11 left detach_ in bert-tiny's mask."""
    import torch

    aten = torch.ops.aten
    return frozenset({aten.detach.default, aten.detach_.default, aten.alias.default})


def drop_no_op_aliases(graph, ops: frozenset | None = None) -> dict[str, int]:
    """Drops, in place, the nodes of an FX graph that call one of `ops` (default:
    no_op_aliases()): every use of such a node (the graph's output included) takes the
    node's input instead, and the node is erased. Returns the count per op dropped, by
    the op's name (`aten.detach_.default`), in graph order."""
    ops = no_op_aliases() if ops is None else ops
    dropped: Counter = Counter()
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in ops:
            continue
        node.replace_all_uses_with(node.args[0])
        graph.erase_node(node)
        dropped[str(node.target)] += 1
    return dict(dropped)


def alias_counts(graph) -> dict[str, int]:
    """The no-op aliasing ops (no_op_aliases()) an FX graph calls, counted by name."""
    ops = no_op_aliases()
    return dict(Counter(str(n.target) for n in graph.nodes
                        if n.op == "call_function" and n.target in ops))


def normalise(prog) -> tuple[object, dict[str, int]]:
    """A torch.export ExportedProgram as IREE's importer expects it: decomposed with
    iree_decompositions() (a new program; `prog` is left as it is) and without no-op
    aliasing ops. Also returns those that torch's export carried, counted per op (empty
    when none): none is left, whether functionalisation removed it (detach_) or
    drop_no_op_aliases did (detach, alias, which functionalisation keeps)."""
    carried = alias_counts(prog.graph)
    out = prog.run_decompositions(iree_decompositions())
    if drop_no_op_aliases(out.graph):
        # An output that was an aliasing node is now its input: the signature, which
        # names the graph's outputs, must name that node too.
        outputs = next(n for n in reversed(out.graph.nodes) if n.op == "output").args[0]
        for spec, node in zip(out.graph_signature.output_specs, outputs, strict=True):
            if hasattr(spec.arg, "name") and hasattr(node, "name"):
                spec.arg.name = node.name
        out.graph.lint()
        out.graph_module.recompile()
    return out, carried


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
        # A forward that returns no tensor (None from a forgotten `return`, a string)
        # fails here, the model's failure, before an empty reference agrees with an
        # empty output.
        outputs, flops = counted_forward(ref.module, ref.inputs, ref.flops)
        reference = tensor_leaves(checked_outputs(outputs))
    inst = ref if spec["dtype"] == "f32" else model.build(
        spec["config"], spec["dtype"], spec["layers"], spec["shape"])
    fixed = make_buffers_persistent(inst.module)
    prog = torch.export.export(inst.module, inst.inputs)
    # IREE imports the program decomposed and without no-op aliasing ops, so that the
    # same model imports alike whatever torch exported it (normalise). The graph
    # statistics stay torch.export's, as a torch case's are (the report's op tables
    # put both side by side); `normalised` counts the aliasing ops IREE did not get.
    imported, carried = normalise(prog)
    importer = FxImporter()
    importer.import_frozen_program(imported, func_name="main")
    # Bytecode, not text: text MLIR prints every weight as hex (gigabytes for BERT-large).
    # Every output atomically: a full disk leaves no partial module for a later run to
    # take for an export, and fails the stage with `could not write PATH: REASON`.
    with atomic_writer(mlir_path) as fh:
        importer.module.operation.write_bytecode(fh)
    save_arrays(inputs_path, "arg", [to_numpy(x) for x in inst.inputs])
    save_arrays(reference_path, "out", [to_numpy(x) for x in reference])
    return {
        "graph": {**graph_stats(prog.graph), "normalised": carried},
        "inputs": [{"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")}
                   for x in inst.inputs],
        "outputs": [{"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")}
                    for x in reference],
        "flops": flops,
        "parameters": int(sum(p.numel() for p in inst.module.parameters())),
        "buffers_made_persistent": fixed,
        "export_seconds": time.monotonic() - t0,
        "torch_version": torch.__version__,
    }


def main(argv: list[str]) -> None:
    spec_json, mlir, inputs, reference, meta = argv
    write_json(meta, export_workload(json.loads(spec_json), mlir, inputs, reference))


if __name__ == "__main__":
    import sys

    from workflow.backends.worker_side import marking_own_bug

    # The model runs in this process and may end it with any status (os._exit in its
    # forward): only benchflow's own failure leaves the marker beside the result file
    # that makes the parent take the exit for our bug (jobs/iree._export_worker).
    with marking_own_bug(sys.argv[-1]):
        worker_main(main)
