"""Helpers shared by the model definitions (torch is imported lazily by callers)."""

from __future__ import annotations

SEED = 0


def torch_dtype(name: str):
    import torch

    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]


def seeded(seed: int = SEED):
    """Seeds torch so that the weights and inputs of a workload are the same in every process."""
    import torch

    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def finish(module, inputs: tuple, dtype: str, flops: float | None = None):
    """Casts an fp32 module and its floating-point inputs to `dtype` and puts it in eval mode."""
    from workflow.models.registry import ModelInstance

    dt = torch_dtype(dtype)
    module = module.to(dt).eval()
    inputs = tuple(x.to(dt) if x.is_floating_point() else x for x in inputs)
    return ModelInstance(module=module, inputs=inputs, flops=flops)
