"""Source text of user model files the end-to-end tests write and then edit (a layer
widened between two runs or two commits), one template for every test that needs one."""

from __future__ import annotations

GROWING_TEMPLATE = '''
from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model

WIDTH = {{width}}  # the second layer's width: what the test changes between runs


@benchmark_model(default_shape=({rows}, {cols}), shape_doc="[rows, width]")
def {name}(config, dtype, layers, shape):
    """Linear(K, K), ReLU, Linear(K, WIDTH): the second matmul grows with WIDTH."""
    import torch

    m, k = shape
    gen = seeded()
    module = torch.nn.Sequential(torch.nn.Linear(k, k, bias=False), torch.nn.ReLU(),
                                 torch.nn.Linear(k, WIDTH, bias=False))
    return finish(module, (torch.randn(m, k, generator=gen),), dtype)
'''


def growing_model(name: str, default_shape: tuple[int, int]) -> str:
    """A model file of `name`: Linear(K, K), ReLU, Linear(K, {width}); format it with
    width= to write it."""
    rows, cols = default_shape
    return GROWING_TEMPLATE.format(name=name, rows=rows, cols=cols)


# A model whose local variable the tests rename between two runs or commits: the same
# program, its source lines moved ({name}: the variable).
RENAMED = '''
from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model


@benchmark_model(default_shape=(32, 64), shape_doc="[rows, cols]")
def scaling(config, dtype, layers, shape):
    """x * 2 + 1, its local variable named {name}."""
    import torch

    {name}, k = shape
    gen = seeded()

    class Scale(torch.nn.Module):
        def forward(self, x):
            return x * 2 + 1

    return finish(Scale(), (torch.randn({name}, k, generator=gen),), dtype)
'''
