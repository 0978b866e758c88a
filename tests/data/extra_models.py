"""Models registered from a suite's `model_modules`, used by the end-to-end tests.

`histc_model` exports fine but IREE cannot compile it (aten.histc has no lowering),
which makes it a real compile failure, not a simulated one.
"""

from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model


@benchmark_model(default_shape=(8, 16), shape_doc="[rows, cols]")
def histc_model(config, dtype, layers, shape):
    """A histogram of the input (aten.histc): no IREE lowering exists."""
    import torch

    class Histc(torch.nn.Module):
        def forward(self, x):
            return torch.histc(x, bins=4)

    gen = seeded()
    return finish(Histc(), (torch.randn(*shape, generator=gen),), dtype)


@benchmark_model(default_shape=(4, 8), shape_doc="[rows, cols]")
def sleepy_model(config, dtype, layers, shape):
    """Sleeps 60 s per call: a case that hangs, for the per-case deadline."""
    import time

    import torch

    class Sleepy(torch.nn.Module):
        def forward(self, x):
            time.sleep(60)
            return x * 2

    gen = seeded()
    return finish(Sleepy(), (torch.randn(*shape, generator=gen),), dtype)


@benchmark_model(default_shape=(4, 8), shape_doc="[rows, cols]")
def slow_to_compile_model(config, dtype, layers, shape):
    """Sleeps 60 s per call under torch.compile only (a graph break Dynamo runs in the
    compiled call, its first included): a compile that outlasts its budget; eager, it
    is quick (its fp32 reference too)."""
    import time

    import torch

    class SlowToCompile(torch.nn.Module):
        def forward(self, x):
            if torch.compiler.is_compiling():
                time.sleep(60)
            return x * 2

    gen = seeded()
    return finish(SlowToCompile(), (torch.randn(*shape, generator=gen),), dtype)


@benchmark_model(default_shape=(4, 8), shape_doc="[rows, cols]")
def crashing_model(config, dtype, layers, shape):
    """Kills its own process when called: a worker crash (as a segfault would)."""
    import os
    import signal

    import torch

    class Crash(torch.nn.Module):
        def forward(self, x):
            os.kill(os.getpid(), signal.SIGKILL)
            return x

    gen = seeded()
    return finish(Crash(), (torch.randn(*shape, generator=gen),), dtype)


@benchmark_model(default_shape=(4, 8), shape_doc="[rows, cols]")
def raising_model(config, dtype, layers, shape):
    """Raises a Python exception in its forward, after printing a warning line to stderr:
    a model's failure whose reason is the exception line at the end of a traceback."""
    import sys

    import torch

    class Raising(torch.nn.Module):
        def forward(self, x):
            print("UserWarning: about to fail", file=sys.stderr)
            raise ValueError(f"raising_model cannot take a {tuple(x.shape)} input")

    gen = seeded()
    return finish(Raising(), (torch.randn(*shape, generator=gen),), dtype)


@benchmark_model(default_shape=(1, 3, 16, 16), shape_doc="[batch, channels, height, width]")
def conv_model(config, dtype, layers, shape):
    """A user's conv net that gives no FLOP count: torch counts its convolution and its
    linear layer (models/flops.py), so its GFLOP/s is not blank."""
    import torch

    class Conv(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(shape[1], 8, 3, padding=1)
            self.fc = torch.nn.Linear(8 * shape[2] * shape[3], 10)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).flatten(1))

    gen = seeded()
    return finish(Conv(), (torch.randn(*shape, generator=gen),), dtype)
