"""The workload whose slowdown tests/perf/rerun_evidence.py injects (issue 43).

`rerun_gemm` is a GEMM of the input x [M, K] with a [K, N] weight, plus a second GEMM of
the first EXTRA_ROWS rows of x with a weight of its own: two dispatches whose work is
proportional to M + EXTRA_ROWS rows. The script copies this file into every run of the
default suite as it is (M = 384, EXTRA_ROWS = 128: 512 rows) and, for the injected run
only, with EXTRA_ROWS = 160: 544 rows, 1.0625x the work, with the same case id, the same
dispatches and the same shapes of every input (row counts multiples of 32, so that no
tile is padded more in one variant than in the other).
"""

from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model

EXTRA_ROWS = 128  # the line the script rewrites for the injected run


@benchmark_model(default_shape=(384, 256, 256), shape_doc="[M, K, N]",
                 description="a GEMM plus a GEMM of the first EXTRA_ROWS rows (issue 43)")
def rerun_gemm(config, dtype, layers, shape):
    import torch

    m, k, n = shape
    rows = min(EXTRA_ROWS, m)
    gen = seeded()

    class TwoGemms(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.main = torch.nn.Linear(k, n, bias=False)
            self.extra = torch.nn.Linear(k, n, bias=False)

        def forward(self, x):
            return self.main(x), self.extra(x[:rows])

    return finish(TwoGemms(), (torch.randn(m, k, generator=gen),), dtype,
                  flops=2.0 * (m + rows) * k * n)
