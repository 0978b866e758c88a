"""Exported programs normalised before IREE's import (workflow/backends/iree/export.py,
normalise): the no-op aliasing ops that torch 2.11 left in bert-tiny's graph
(`aten.detach_`, which iree-compile refused on the H100, shared/gpu/h100-2026-11-27) are
gone without a value changed, and a program that carries them compiles and matches eager
torch.

torch 2.13 (this venv) no longer leaves detach_ in bert-tiny, but still does where forward
makes a tensor of a Python number, as bert makes its mask's minimum: torch.tensor(-0.25)
traces to lift_fresh_copy, then detach_ (Clamped below). The other aliasing ops are put
into its export's graph by the tests, where torch's functionalisation keeps them.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workflow.backends.iree.export import (
    alias_counts,
    drop_no_op_aliases,
    no_op_aliases,
    normalise,
)

aten = torch.ops.aten
ALIASES = (aten.detach_.default, aten.alias.default, aten.detach.default)


class Clamped(torch.nn.Module):
    """A linear layer clamped from below by a tensor made in forward, as bert makes its
    attention mask's minimum (torch.tensor(torch.finfo(dtype).min))."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(16, 8)

    def forward(self, x):
        floor = torch.tensor(-0.25)
        return torch.maximum(self.lin(x), floor) * 2.0


def with_aliases(graph, after) -> None:
    """Puts detach_, alias and detach, in a chain, between the node `after` and its users,
    each node with its input's metadata (the importer types results by it)."""
    users = list(after.users)
    prev = after
    for op in ALIASES:
        with graph.inserting_after(prev):
            node = graph.call_function(op, (prev,))
        node.meta = dict(prev.meta)
        prev = node
    for user in users:
        user.replace_input_with(after, prev)


def exported(module=None, rows: int = 4):
    """Clamped (or `module`) in eval mode, an input, and torch.export's program of it."""
    module = (module or Clamped()).eval()
    x = torch.randn(rows, 16, generator=torch.Generator().manual_seed(1))
    return module, x, torch.export.export(module, (x,))


def exported_with_aliases():
    """Clamped's export with the aliasing chain on the lifted constant's copy and on the
    linear layer's output (the latter is what the graph returns through maximum)."""
    module, x, prog = exported()
    graph = prog.graph
    nodes = [n for n in graph.nodes if n.op == "call_function"]
    lifted = next(n for n in nodes if n.target == aten.lift_fresh_copy.default)
    linear = next(n for n in nodes if n.target == aten.linear.default)
    for node in (lifted, linear):
        with_aliases(graph, node)
    graph.lint()
    prog.graph_module.recompile()
    return module, x, prog


def ops_of(graph) -> list:
    return [n.target for n in graph.nodes if n.op == "call_function"]


def test_drop_no_op_aliases_counts_them_and_keeps_every_value():
    def f(x, y):
        a = aten.detach_.default(aten.add.Tensor(x, y))
        b = aten.alias.default(aten.detach.default(a))
        return aten.mul.Tensor(b, aten.detach.default(y)), aten.alias.default(x)

    gm = torch.fx.symbolic_trace(f)
    x, y = torch.randn(3, 5), torch.randn(3, 5)
    want = f(x, y)
    dropped = drop_no_op_aliases(gm.graph)
    gm.recompile()
    assert dropped == {"aten.detach_.default": 1, "aten.detach.default": 2,
                       "aten.alias.default": 2}
    assert not set(ops_of(gm.graph)) & no_op_aliases()
    assert ops_of(gm.graph) == [aten.add.Tensor, aten.mul.Tensor]
    got = gm(x, y)
    # The output that was an alias of an input is now that input itself.
    assert torch.equal(got[0], want[0]) and got[1] is x


def test_drop_no_op_aliases_leaves_a_graph_without_them_alone():
    gm = torch.fx.symbolic_trace(lambda x: aten.relu.default(aten.neg.default(x)))
    before = ops_of(gm.graph)
    assert drop_no_op_aliases(gm.graph) == {}
    assert ops_of(gm.graph) == before


def test_torch_export_itself_leaves_detach_on_a_tensor_made_in_forward():
    _, _, prog = exported()
    assert alias_counts(prog.graph) == {"aten.detach_.default": 1}


@pytest.mark.parametrize("make,carried", [
    (exported, {"aten.detach_.default": 1}),
    (exported_with_aliases, {"aten.detach_.default": 3, "aten.alias.default": 2,
                             "aten.detach.default": 2}),
], ids=["as-exported", "with-aliases"])
@pytest.mark.slow
def test_normalise_removes_every_alias_and_counts_those_exported(make, carried):
    module, x, prog = make()
    before = ops_of(prog.graph)
    out, counted = normalise(prog)
    assert counted == carried
    assert ops_of(prog.graph) == before  # a new program; the exported one is unchanged
    assert alias_counts(out.graph) == {}
    out.validate()
    with torch.no_grad():
        assert torch.allclose(out.module()(x), module(x))


def test_normalise_keeps_what_the_importer_lowers_itself():
    class Plain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(16, 8)

        def forward(self, x):
            q = torch.nn.functional.gelu(self.lin(x)).unsqueeze(0)
            return torch.nn.functional.scaled_dot_product_attention(q, q, q)

    module, x, prog = exported(Plain())
    out, counted = normalise(prog)
    assert counted == {}
    # linear and attention stay as they are (IREE's matmul and attention), not the core
    # ATen table's permute and addmm, and softmax of bmm.
    assert ops_of(out.graph) == [aten.linear.default, aten.gelu.default,
                                 aten.unsqueeze.default,
                                 aten.scaled_dot_product_attention.default]
    with torch.no_grad():
        assert torch.allclose(out.module()(x), module(x))


@pytest.mark.slow
def test_normalise_decomposes_an_eval_batch_norm():
    # Functionalisation leaves the mutating _native_batch_norm_legit of an eval-mode
    # BatchNorm and fails on it unless the table decomposes it (resnet18).
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).eval()
    with torch.no_grad():
        module[1].running_mean.uniform_(-1, 1)
        module[1].running_var.uniform_(0.5, 2)
    x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    out, counted = normalise(torch.export.export(module, (x,)))
    assert counted == {}
    assert not [op for op in ops_of(out.graph) if "batch_norm" in str(op)]
    with torch.no_grad():
        assert torch.allclose(out.module()(x), module(x), atol=1e-6)


# A model file of the test's own (a registry name used nowhere else: one registry per
# process), whose forward makes a tensor of a Python number as Clamped does.
MODEL = "b35_clamped"
MODEL_FILE = f'''"""Clamped from below by a tensor made in forward."""
from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model


@benchmark_model(default_shape=(4, 16), shape_doc="[rows, features]")
def {MODEL}(config, dtype, layers, shape):
    """max(linear(x), -0.25) * 2."""
    import torch

    class Clamped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(shape[1], 8)

        def forward(self, x):
            return torch.maximum(self.lin(x), torch.tensor(-0.25)) * 2.0

    torch.manual_seed(0)
    return finish(Clamped(), (torch.randn(*shape, generator=seeded()),), dtype)
'''


@pytest.mark.slow
def test_the_export_stage_records_what_was_normalised(tmp_path):
    from workflow.backends.iree.export import export_workload
    from workflow.records.case import section

    (tmp_path / "clamped.py").write_text(MODEL_FILE)
    spec = {"model": MODEL, "config": "default", "dtype": "f32", "shape": [4, 16],
            "layers": None, "model_modules": [str(tmp_path / "clamped.py")]}
    paths = [str(tmp_path / n) for n in ("module.mlirbc", "inputs.npz", "reference.npz")]
    meta = export_workload(spec, *paths)
    graph = meta["graph"]
    assert graph["normalised"] == {"aten.detach_.default": 1}
    # The statistics stay torch.export's own graph's, as a torch case's are.
    assert graph["op_histogram"]["aten.detach_.default"] == 1
    assert section("graph", graph)["normalised"] == {"aten.detach_.default": 1}
    assert section("graph", {k: v for k, v in graph.items() if k != "normalised"}
                   )["normalised"] is None


def compile_to(prog, tmp_path, name: str):
    """The program imported as the export stage imports it, compiled for this CPU:
    the vmfb's path, or StageError with iree-compile's diagnostics."""
    from iree.compiler.extras.fx_importer import FxImporter

    from workflow.backends.iree import tools
    from workflow.backends.proc import run_tool, tool_path

    importer = FxImporter()
    importer.import_frozen_program(prog, func_name="main")
    mlir, vmfb = tmp_path / f"{name}.mlirbc", tmp_path / f"{name}.vmfb"
    with open(mlir, "wb") as fh:
        importer.module.operation.write_bytecode(fh)
    cpu = {"target_backend": "llvm-cpu", "target_cpu": "generic"}
    run_tool([tool_path("iree-compile"), str(mlir), "--iree-input-type=torch",
              *tools.target_flags(cpu), "-o", str(vmfb)], stage="compile", timeout=120)
    return vmfb


@pytest.mark.tool
def test_iree_compiles_the_normalised_program_and_refuses_the_raw_one(tmp_path):
    from workflow.backends.iree.export import save_arrays
    from workflow.backends.iree.verify import run_module
    from workflow.errors import StageError

    module, x, prog = exported()
    # As on the H100 with torch 2.11: the importer emits detach_ as an unregistered op,
    # which iree-compile cannot legalise.
    with pytest.raises(StageError) as err:
        compile_to(prog, tmp_path, "raw")
    assert "failed to legalize operation 'torch.operator'" in err.value.message
    assert "torch.aten.detach_" in err.value.message
    save_arrays(str(tmp_path / "inputs.npz"), "arg", [x.numpy()])
    with torch.no_grad():
        want = module(x).numpy()
    assert (want == -0.5).any()  # the clamp to the tensor made in forward takes part
    for name, make in (("normalised", exported), ("with-aliases", exported_with_aliases)):
        vmfb = compile_to(normalise(make()[2])[0], tmp_path, name)
        outs, _ = run_module(str(vmfb), str(tmp_path / "inputs.npz"), "local-sync")
        assert len(outs) == 1 and outs[0].shape == want.shape, name
        np.testing.assert_allclose(outs[0], want, rtol=1e-5, atol=1e-6, err_msg=name)
