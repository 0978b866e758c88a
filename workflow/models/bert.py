"""BERT from transformers' BertConfig with seeded random weights (no hub download)."""

from __future__ import annotations

from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model

# (hidden, layers, heads, intermediate) of the standard BERT sizes;
# tiny is google/bert_uncased_L-2_H-128.
BERT_CONFIGS = {
    "tiny": (128, 2, 2, 512),
    "base": (768, 12, 12, 3072),
    "large": (1024, 24, 16, 4096),
}
VOCAB = 30522


@benchmark_model(
    configs=list(BERT_CONFIGS), default_shape=(1, 128), shape_doc="[batch, seq]",
    supports_layers=True, default_layers={c: v[1] for c, v in BERT_CONFIGS.items()},
)
def bert(config: str, dtype: str, layers: int | None, shape):
    """BERT encoder (BertModel) over token ids; `layers` sets num_hidden_layers."""
    import torch
    from transformers import BertConfig, BertModel

    hidden, n_layers, heads, inter = BERT_CONFIGS[config]
    batch, seq = shape
    gen = seeded()
    cfg = BertConfig(
        vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers or n_layers,
        num_attention_heads=heads, intermediate_size=inter, max_position_embeddings=max(512, seq),
        attn_implementation="eager",
    )
    module = BertModel(cfg, add_pooling_layer=True)
    ids = torch.randint(0, VOCAB, (batch, seq), generator=gen)
    tokens = batch * seq
    flops = (layers or n_layers) * (2.0 * tokens * (4 * hidden * hidden + 2 * hidden * inter)
                                    + 4.0 * batch * seq * seq * hidden)
    return finish(module, (ids,), dtype, flops=flops)
