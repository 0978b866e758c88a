"""Layer-level workloads: GEMM-like layers and a transformer block, as in torchao's
microbenchmark model types. Shapes are [M, K, N] (tokens, in-features, out-features)
unless stated otherwise."""

from __future__ import annotations

from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model

GEMM_SHAPE_DOC = "[M, K, N]: input M x K, weight K x N"

# Activation name -> torch.nn class name; the names follow torchao's `ln_linear_<act>`.
ACTIVATIONS = {
    "relu": "ReLU",
    "sigmoid": "Sigmoid",
    "leakyrelu": "LeakyReLU",
    "relu6": "ReLU6",
    "gelu": "GELU",
    "silu": "SiLU",
    "hardswish": "Hardswish",
}


def _gemm_input(shape, gen):
    import torch

    m, k, _ = shape
    return (torch.randn(m, k, generator=gen),)


@benchmark_model(default_shape=(128, 256, 256), shape_doc=GEMM_SHAPE_DOC)
def linear(config: str, dtype: str, layers: int | None, shape):
    """One nn.Linear(K, N) without bias applied to an M x K input."""
    import torch

    m, k, n = shape
    gen = seeded()
    module = torch.nn.Linear(k, n, bias=False)
    return finish(module, _gemm_input(shape, gen), dtype, flops=2.0 * m * k * n)


def _ln_linear(act: str):
    def build(config: str, dtype: str, layers: int | None, shape):
        import torch

        m, k, n = shape
        gen = seeded()
        module = torch.nn.Sequential(
            torch.nn.LayerNorm(k), torch.nn.Linear(k, n), getattr(torch.nn, ACTIVATIONS[act])()
        )
        return finish(module, _gemm_input(shape, gen), dtype, flops=2.0 * m * k * n)

    build.__doc__ = f"LayerNorm(K), Linear(K, N) with bias, then {ACTIVATIONS[act]}."
    return build


for _act in ACTIVATIONS:
    benchmark_model(
        name=f"ln_linear_{_act}", default_shape=(128, 256, 256), shape_doc=GEMM_SHAPE_DOC
    )(_ln_linear(_act))


@benchmark_model(
    default_shape=(128, 256, 512), shape_doc="[M, K, N]: M tokens of width K, hidden width N",
    supports_layers=True, default_layers={"default": 2},
)
def mlp(config: str, dtype: str, layers: int | None, shape):
    """`layers` (default 2) blocks of Linear(K, N), GELU, Linear(N, K): a feed-forward stack."""
    import torch

    m, k, n = shape
    depth = layers or 2
    gen = seeded()
    blocks = []
    for _ in range(depth):
        blocks += [torch.nn.Linear(k, n), torch.nn.GELU(), torch.nn.Linear(n, k)]
    module = torch.nn.Sequential(*blocks)
    return finish(module, _gemm_input(shape, gen), dtype, flops=depth * 4.0 * m * k * n)


# Transformer block sizes: (dim, heads, mlp hidden).
BLOCK_CONFIGS = {"tiny": (64, 4, 256), "small": (256, 8, 1024), "base": (768, 12, 3072)}


def _block_classes():
    import torch

    class RMSNorm(torch.nn.Module):
        def __init__(self, dim: int, eps: float = 1e-6):
            super().__init__()
            self.eps = eps
            self.weight = torch.nn.Parameter(torch.ones(dim))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class Attention(torch.nn.Module):
        def __init__(self, dim: int, heads: int):
            super().__init__()
            self.heads = heads
            self.wqkv = torch.nn.Linear(dim, 3 * dim, bias=False)
            self.wo = torch.nn.Linear(dim, dim, bias=False)

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.wqkv(x).split(d, dim=-1)
            q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(y.transpose(1, 2).reshape(b, s, d))

    class FeedForward(torch.nn.Module):
        def __init__(self, dim: int, hidden: int):
            super().__init__()
            self.w1 = torch.nn.Linear(dim, hidden, bias=False)
            self.w3 = torch.nn.Linear(dim, hidden, bias=False)
            self.w2 = torch.nn.Linear(hidden, dim, bias=False)

        def forward(self, x):
            return self.w2(torch.nn.functional.silu(self.w1(x)) * self.w3(x))

    class Block(torch.nn.Module):
        def __init__(self, dim: int, heads: int, hidden: int):
            super().__init__()
            self.attention_norm = RMSNorm(dim)
            self.attention = Attention(dim, heads)
            self.ffn_norm = RMSNorm(dim)
            self.feed_forward = FeedForward(dim, hidden)

        def forward(self, x):
            h = x + self.attention(self.attention_norm(x))
            return h + self.feed_forward(self.ffn_norm(h))

    return Block


@benchmark_model(
    configs=list(BLOCK_CONFIGS), default_shape=(1, 64),
    shape_doc="[batch, seq]", supports_layers=True,
    default_layers=dict.fromkeys(BLOCK_CONFIGS, 1),
)
def transformer_block(config: str, dtype: str, layers: int | None, shape):
    """Pre-norm decoder block(s): RMSNorm, causal attention, RMSNorm, SwiGLU MLP (torchao-style)."""
    import torch

    dim, heads, hidden = BLOCK_CONFIGS[config]
    batch, seq = shape
    gen = seeded()
    block = _block_classes()
    module = torch.nn.Sequential(*[block(dim, heads, hidden) for _ in range(layers or 1)])
    x = torch.randn(batch, seq, dim, generator=gen)
    tokens = batch * seq
    per_layer = 2.0 * tokens * dim * (4 * dim + 3 * hidden) + 4.0 * batch * seq * seq * dim
    return finish(module, (x,), dtype, flops=per_layer * (layers or 1))


# torchao's microbenchmark `transformer_block` model_type: TransformerBlock of
# torchao/testing/model_architectures.py at pytorch/ao dbef6992fb6bc20da9c121baedfa8125625ab641
# (create_model_and_input_data): [M, K, N] means M sequences of TORCHAO_BLOCK_SEQ tokens
# of hidden width K, 8 heads, MLP ratio 4; N is not used (as in torchao).
TORCHAO_BLOCK_SEQ = 16
TORCHAO_BLOCK_HEADS = 8
TORCHAO_BLOCK_MLP_RATIO = 4


def _torchao_block_class():
    import torch

    class RMSNorm(torch.nn.Module):
        def __init__(self, dim: int, eps: float = 1e-5):
            super().__init__()
            self.eps = eps
            self.weight = torch.nn.Parameter(torch.ones(dim))

        def forward(self, x):
            xf = x.float()
            normed = xf * torch.rsqrt(torch.mean(xf * xf, dim=-1, keepdim=True) + self.eps)
            return normed.type_as(x) * self.weight

    class TransformerBlock(torch.nn.Module):
        def __init__(self, hidden_dim: int, num_heads: int, mlp_ratio: int):
            super().__init__()
            self.hidden_dim, self.num_heads = hidden_dim, num_heads
            self.head_dim = hidden_dim // num_heads
            self.qkv = torch.nn.Linear(hidden_dim, 3 * hidden_dim, bias=False)
            self.proj = torch.nn.Linear(hidden_dim, hidden_dim, bias=False)
            mlp_hidden = int(hidden_dim * mlp_ratio)
            self.mlp_fc1 = torch.nn.Linear(hidden_dim, mlp_hidden, bias=False)
            self.mlp_fc2 = torch.nn.Linear(mlp_hidden, hidden_dim, bias=False)
            self.norm1 = RMSNorm(hidden_dim)
            self.norm2 = RMSNorm(hidden_dim)
            self.activation = torch.nn.GELU()

        def forward(self, x):
            b, s, _ = x.shape
            residual = x
            qkv = self.qkv(self.norm1(x)).reshape(b, s, 3, self.num_heads, self.head_dim)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
            q, k, v = (t.reshape(b * self.num_heads, s, self.head_dim) for t in (q, k, v))
            attn = torch.softmax((q @ k.transpose(-2, -1)) * (1.0 / self.head_dim**0.5), dim=-1)
            y = (attn @ v).reshape(b, self.num_heads, s, self.head_dim)
            y = y.transpose(1, 2).reshape(b, s, self.hidden_dim)
            x = residual + self.proj(y)
            return x + self.mlp_fc2(self.activation(self.mlp_fc1(self.norm2(x))))

    return TransformerBlock


@benchmark_model(
    default_shape=(4, 64, 64),
    shape_doc=f"[M, K, N]: M sequences of {TORCHAO_BLOCK_SEQ} tokens of hidden width K "
              f"(a multiple of {TORCHAO_BLOCK_HEADS}); N unused, as in torchao",
)
def torchao_transformer_block(config: str, dtype: str, layers: int | None, shape):
    """torchao's microbenchmark transformer_block: RMSNorm, 8-head attention, RMSNorm, GELU MLP."""
    import torch

    m, k, _ = shape
    if k % TORCHAO_BLOCK_HEADS:
        raise ValueError(f"torchao's transformer_block splits K={k} into "
                         f"{TORCHAO_BLOCK_HEADS} heads; K must be a multiple of it")
    gen = seeded()
    module = _torchao_block_class()(k, TORCHAO_BLOCK_HEADS, TORCHAO_BLOCK_MLP_RATIO)
    x = torch.randn(m, TORCHAO_BLOCK_SEQ, k, generator=gen)
    tokens = m * TORCHAO_BLOCK_SEQ
    linear = 2.0 * tokens * (4 * k * k + 2 * TORCHAO_BLOCK_MLP_RATIO * k * k)
    attention = 4.0 * m * TORCHAO_BLOCK_SEQ * TORCHAO_BLOCK_SEQ * k
    return finish(module, (x,), dtype, flops=linear + attention)
