"""A model that gives no FLOP count (a user's conv net from model_modules) gets torch's
count of its reference forward call (models/flops.py), in IREE's export and in the torch
worker alike, so that its GFLOP/s is not blank (issue 45, item 9)."""

from __future__ import annotations

import pytest

from tests.conftest import DATA, write_suite
from workflow.models.flops import counted_forward
from workflow.models.registry import get_model, load_model_files

# conv_model at [1, 3, 16, 16]: a 3x3 conv, 3 -> 8 channels, on 16 x 16 outputs, then a
# linear layer 2048 -> 10; 2 FLOPs per multiply-add.
CONV = 2 * (8 * 16 * 16) * (3 * 3 * 3)
LINEAR = 2 * 10 * (8 * 16 * 16)
SUITE = {"suite_name": "conv", "model_modules": [str(DATA / "extra_models.py")],
         "skus": {"host": {"iree": {"target_cpu": "host"}}},
         "workloads": [{"model": "conv_model", "backends": ["iree", "torch-eager"]}]}


def conv_workload(tmp_path):
    from workflow.suite.load import load

    suite = load([write_suite(tmp_path / "s.yaml", SUITE)])
    (workload,) = suite.workloads.values()
    return workload


def test_a_model_without_flops_gets_torchs_count_and_a_given_count_stands():
    load_model_files([str(DATA / "extra_models.py")])
    inst = get_model("conv_model").build("default", "f32", None, None)
    assert inst.flops is None
    _, flops = counted_forward(inst.module, inst.inputs, inst.flops)
    assert flops == CONV + LINEAR
    mnist = get_model("mnist").build("default", "f32", None, None)
    assert counted_forward(mnist.module, mnist.inputs, mnist.flops)[1] == mnist.flops
    # The built-in models' own hook count is the same figure torch's counter gives.
    assert counted_forward(mnist.module, mnist.inputs, None)[1] == mnist.flops


@pytest.mark.tool
def test_both_backends_record_the_count_of_a_conv_model(tmp_path):
    """The export worker's result (IREE: the case's throughput reads its `flops`) and the
    torch worker's reference both carry the counted FLOPs."""
    from workflow.backends.iree.export import export_workload
    from workflow.backends.torch.characterize import _reference_outputs

    workload = conv_workload(tmp_path)
    done = export_workload(workload.export_spec(), str(tmp_path / "m.mlirbc"),
                           str(tmp_path / "in.npz"), str(tmp_path / "ref.npz"))
    assert done["flops"] == CONV + LINEAR
    _, flops = _reference_outputs(workload.spec())
    assert flops == CONV + LINEAR


def test_a_training_case_counts_its_whole_step():
    """A training case times forward, backward and the optimizer's step: its GFLOP/s is
    that step's FLOPs over its time, not the forward's alone (2 to 3 times too low)."""
    from workflow.backends.torch.characterize import _reference_outputs

    m, k, n = 8, 16, 32
    w = {"model": "mlp", "config": "default", "layers": 2, "shape": [m, k, n]}
    forward = 2 * 4.0 * m * k * n  # two blocks of Linear(K, N), Linear(N, K)
    assert _reference_outputs({**w, "mode": "inference"})[1] == forward
    # The backward: every weight's gradient (the forward's size again) and every input
    # gradient but the first layer's, whose input needs none.
    step = forward + forward + (forward - 2.0 * m * k * n)
    assert _reference_outputs({**w, "mode": "training"})[1] == step
    w = {"model": "linear", "config": "default", "layers": None, "shape": [m, k, n]}
    assert _reference_outputs({**w, "mode": "training"})[1] == 2 * (2.0 * m * k * n)
