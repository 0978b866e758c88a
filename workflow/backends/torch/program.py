"""What a torch case runs, as one digest that a rename does not move: the model built as
a case builds it (prepared.Prepared, before its recipe and compile mode, which the
caller keys by name), exported with torch.export, and its graph written out without
names or debug locations, with the values of its weights and inputs.

Two revisions of a model file whose only difference is a renamed variable, a comment or
a moved line export the same graph: node names come from the source's names and each
node's `stack_trace` / `source_fn_stack` name its lines, so both are left out; what is
kept is each node's operation and target, its arguments by position, and the shape and
dtype it computes. A parameter or input is known by its place in the graph's signature
and its kind, never by its attribute path (a renamed `self.proj` is the same weight),
and by its bytes, so a change of initialisation is a change (as the IREE side's exported
module carries its weights)."""

from __future__ import annotations

import hashlib


def _tensor_digest(t) -> str:
    """sha256 of a tensor's dtype, shape and bytes (bf16 and other dtypes numpy lacks
    included: its storage read as bytes)."""
    import torch

    t = t.detach().cpu().contiguous()
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return hashlib.sha256(f"{t.dtype}{tuple(t.shape)}".encode() + raw).hexdigest()


def _value(v) -> str:
    """A node's computed value as its shape and dtype (a FakeTensor's), or its type."""
    shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{dtype}{tuple(shape)}"
    if isinstance(v, list | tuple):
        return "(" + ",".join(_value(x) for x in v) + ")"
    return type(v).__name__


def graph_lines(program) -> list[str]:
    """An ExportedProgram's graph, one line per node, without names or locations."""
    import torch

    index: dict = {}
    kinds = [str(s.kind) for s in program.graph_signature.input_specs]
    gm = program.graph_module

    def arg(a):
        if isinstance(a, torch.fx.Node):
            return f"%{index[a]}"
        if isinstance(a, list | tuple):
            return type(a)(arg(x) for x in a)
        if isinstance(a, dict):
            return {k: arg(v) for k, v in sorted(a.items())}
        return a

    lines, placeholder = [], 0
    for i, node in enumerate(gm.graph.nodes):
        index[node] = i
        if node.op == "placeholder":
            target = kinds[placeholder] if placeholder < len(kinds) else "input"
            placeholder += 1
        elif node.op == "get_attr":
            held = getattr(gm, node.target, None)
            target = (_tensor_digest(held) if isinstance(held, torch.Tensor)
                      else type(held).__name__)
        else:
            target = str(node.target)
        lines.append(repr((node.op, target, arg(node.args), arg(node.kwargs),
                           _value(node.meta.get("val")))))
    return lines


def program_digest(workload: dict) -> str:
    """The digest of what a torch case of this workload runs (module doc): the model
    built on the CPU in its mode, exported, its graph lines, then its lifted weights,
    buffers and constants in signature order, then its inputs. Raises whatever the
    model's build or torch.export raises: the caller measures such a case."""
    import torch

    from workflow.models.registry import get_model, load_model_files

    load_model_files(workload.get("model_modules", []))
    inst = get_model(workload["model"]).build(workload["config"], workload["dtype"],
                                              workload["layers"], workload["shape"])
    module = inst.module
    module.train(workload.get("mode") == "training")
    program = torch.export.export(module, tuple(inst.inputs))
    h = hashlib.sha256()
    for line in graph_lines(program):
        h.update(line.encode() + b"\n")
    for spec in program.graph_signature.input_specs:
        held = program.state_dict.get(spec.target, program.constants.get(spec.target)) \
            if spec.target is not None else None
        h.update(f"{spec.kind}:".encode())
        if isinstance(held, torch.Tensor):
            h.update(_tensor_digest(held).encode())
    for x in inst.inputs:
        h.update(b"input:" + (_tensor_digest(x) if isinstance(x, torch.Tensor)
                              else repr(x)).encode())
    return h.hexdigest()
