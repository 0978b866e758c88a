"""Decoder-only language models from transformers configs (GPT-2, Llama) with seeded
random weights: no hub download. Each returns the logits of one causal-LM forward over
token ids, without a KV cache (the benchmark is one prefill)."""

from __future__ import annotations

from workflow.models.common import finish, seeded
from workflow.models.registry import benchmark_model

# (hidden, layers, heads, vocab); small is GPT-2 small (124M parameters).
GPT2_CONFIGS = {
    "tiny": (64, 2, 2, 50257),
    "small": (768, 12, 12, 50257),
}
# (hidden, layers, heads, kv heads, intermediate, vocab): a tiny Llama with grouped-query
# attention (2 query heads per kv head), so the GQA path is exported too.
LLAMA_CONFIGS = {
    "tiny": (64, 2, 4, 2, 172, 32000),
}


def _logits_module(model):
    """Wraps a causal LM so that forward(ids) returns one plain tensor.

    The FX importer and iree-benchmark-module want tensors out, not a ModelOutput with a
    cache; use_cache=False keeps DynamicCache objects out of the exported graph.

    The causal mask is passed ready-made (4D, additive, as transformers' eager mask):
    without a mask transformers looks for packed sequences in the position ids with
    aten.diff, which IREE cannot lower, and a 2D mask makes it build a boolean scalar
    literal that IREE cannot lower either. The values are those of the default mask."""
    import torch

    class Logits(torch.nn.Module):
        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, input_ids):
            seq = input_ids.shape[1]
            dtype = self.lm.get_input_embeddings().weight.dtype
            blocked = torch.ones(seq, seq, dtype=torch.bool, device=input_ids.device).triu(1)
            mask = torch.zeros(seq, seq, dtype=dtype, device=input_ids.device).masked_fill(
                blocked, torch.finfo(dtype).min)
            return self.lm(input_ids=input_ids, attention_mask=mask[None, None],
                           use_cache=False, return_dict=True).logits

    return Logits(model)


def _plain_rotary(rotary):
    """Llama's rotary embedding with the same arithmetic but without its @torch.no_grad():
    a grad-mode switch inside forward exports as the higher-order op
    `wrap_with_set_grad_enabled`, which IREE's FX importer does not implement. The model is
    only ever run for inference, so dropping the switch changes no value."""
    import torch

    class PlainRotary(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("inv_freq", rotary.inv_freq.detach().clone())
            self.attention_scaling = rotary.attention_scaling

        def forward(self, x, position_ids):
            freqs = position_ids[..., None].float() * self.inv_freq.float()
            emb = torch.cat((freqs, freqs), dim=-1)
            cos = emb.cos() * self.attention_scaling
            sin = emb.sin() * self.attention_scaling
            return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)

    return PlainRotary()


def _decoder_flops(tokens: int, batch: int, seq: int, hidden: int, layers: int,
                   per_token_weights: int, vocab: int) -> float:
    """Matmul FLOPs of one prefill: weights, attention scores and values, LM head."""
    attention = 4.0 * batch * seq * seq * hidden
    return layers * (2.0 * tokens * per_token_weights + attention) + 2.0 * tokens * hidden * vocab


@benchmark_model(
    configs=list(GPT2_CONFIGS), default_shape=(1, 128), shape_doc="[batch, seq]",
    default_layers={c: v[1] for c, v in GPT2_CONFIGS.items()},
    supports_layers=True, min_pcc={"f32": 0.999, "f16": 0.99, "bf16": 0.97},
)
def gpt2(config: str, dtype: str, layers: int | None, shape):
    """GPT-2 causal LM (GPT2LMHeadModel) over token ids -> logits; `layers` sets n_layer."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    hidden, n_layers, heads, vocab = GPT2_CONFIGS[config]
    batch, seq = shape
    depth = layers or n_layers
    gen = seeded()
    cfg = GPT2Config(
        vocab_size=vocab, n_positions=max(1024, seq), n_embd=hidden, n_layer=depth,
        n_head=heads, use_cache=False, attn_implementation="eager",
    )
    module = _logits_module(GPT2LMHeadModel(cfg))
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    flops = _decoder_flops(batch * seq, batch, seq, hidden, depth, 12 * hidden * hidden, vocab)
    return finish(module, (ids,), dtype, flops=flops)


@benchmark_model(
    configs=list(LLAMA_CONFIGS), default_shape=(1, 128), shape_doc="[batch, seq]",
    default_layers={c: v[1] for c, v in LLAMA_CONFIGS.items()},
    supports_layers=True, min_pcc={"f32": 0.999, "f16": 0.99, "bf16": 0.97},
)
def llama(config: str, dtype: str, layers: int | None, shape):
    """Llama causal LM (LlamaForCausalLM: RMSNorm, RoPE, GQA, SwiGLU) -> logits."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, n_layers, heads, kv_heads, inter, vocab = LLAMA_CONFIGS[config]
    batch, seq = shape
    depth = layers or n_layers
    gen = seeded()
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
        num_hidden_layers=depth, num_attention_heads=heads, num_key_value_heads=kv_heads,
        max_position_embeddings=max(2048, seq), use_cache=False, attn_implementation="eager",
    )
    lm = LlamaForCausalLM(cfg)
    lm.model.rotary_emb = _plain_rotary(lm.model.rotary_emb)
    module = _logits_module(lm)
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    kv_dim = hidden // heads * kv_heads
    weights = 2 * hidden * hidden + 2 * hidden * kv_dim + 3 * hidden * inter
    flops = _decoder_flops(batch * seq, batch, seq, hidden, depth, weights, vocab)
    return finish(module, (ids,), dtype, flops=flops)
