"""A model's FLOPs per forward call where its definition gives none (a suite's own model
from model_modules, a conv net written by a user): counted by torch while the reference
forward call that both backends make anyway runs, so that its GFLOP/s is not blank."""

from __future__ import annotations

from typing import Any


def counted_forward(module, inputs: tuple, flops: float | None) -> tuple[Any, float | None]:
    """The module's outputs for `inputs` and its FLOPs per call: `flops` when the model
    gave them, else torch's count of this call (torch.utils.flop_counter: matrix
    products, convolutions and attention, 2 per multiply-add, as the built-in models
    count; elementwise work is not counted). None when the call has none of them."""
    if flops is not None:
        return module(*inputs), flops
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        out = module(*inputs)
    return out, float(counter.get_total_flops()) or None
