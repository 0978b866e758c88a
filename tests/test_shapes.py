"""Every torchao shape generator, as exact lists."""

import pytest

from workflow.suite.shapes import generate, generate_all


def shapes(spec):
    return [s for _, s in generate(spec)]


def test_custom():
    assert shapes({"name": "custom", "shapes": [[1, 2, 3], [4, 5, 6]]}) == [[1, 2, 3], [4, 5, 6]]


def test_llama_70b_fused_shapes():
    assert generate({"name": "llama"}) == [
        ("llama_attn.wqkv", [16384, 8192, 1280]),
        ("llama_attn.w0", [16384, 1024, 8192]),
        ("llama_ffn.w13", [16384, 8192, 7168]),
        ("llama_ffn.w2", [16384, 3584, 8192]),
    ]


def test_pow2_defaults_and_bounds():
    assert shapes({"name": "pow2"}) == [[2**p] * 3 for p in range(10, 15)]
    assert shapes({"name": "pow2", "min_power": 3, "max_power": 4}) == [[8, 8, 8], [16, 16, 16]]


def test_pow2_extended_adds_the_half_steps():
    assert shapes({"name": "pow2_extended", "min_power": 10, "max_power": 11}) == [
        [1024] * 3, [1536] * 3, [2048] * 3, [3072] * 3]
    assert len(shapes({"name": "pow2_extended"})) == 10


def test_small_sweep_is_increasing_only():
    got = shapes({"name": "small_sweep", "min_power": 1, "max_power": 2})
    assert got == [[2, 2, 2], [2, 2, 4], [2, 4, 4], [4, 4, 4]]
    default = shapes({"name": "small_sweep"})
    assert len(default) == 35  # C(5 + 2, 3) non-decreasing triples of 5 powers
    assert all(m <= k <= n for m, k, n in default)
    assert default[0] == [1024] * 3 and default[-1] == [16384] * 3


def test_sweep_is_the_full_cube():
    got = shapes({"name": "sweep", "min_power": 1, "max_power": 2})
    assert got == [[m, k, n] for m in (2, 4) for k in (2, 4) for n in (2, 4)]
    full = shapes({"name": "sweep"})
    assert len(full) == 512 and full[0] == [256] * 3 and full[-1] == [32768] * 3
    assert [s for _, s in generate({"name": "sweep", "min_power": None, "max_power": None})] \
        == full


def test_names_are_numbered_and_duplicates_dropped_across_generators():
    assert [n for n, _ in generate({"name": "pow2", "min_power": 1, "max_power": 2})] == [
        "pow2_0", "pow2_1"]
    merged = generate_all([{"name": "pow2", "min_power": 1, "max_power": 2},
                           {"name": "custom", "shapes": [[2, 2, 2], [3, 3, 3]]}])
    assert merged == [[2, 2, 2], [4, 4, 4], [3, 3, 3]]


def test_unknown_generator():
    with pytest.raises(ValueError, match="unknown shape generator 'cube'"):
        generate({"name": "cube"})


# The fixed model shapes of torchao's get_shapes_for_config, written out as read from
# pytorch/ao benchmarks/microbenchmarks/benchmark_runner.py at
# dbef6992fb6bc20da9c121baedfa8125625ab641 (not computed by benchflow).
def test_llama4():
    assert generate({"name": "llama4"}) == [
        ("llama4_FFN", [16384, 8192, 5120]),
        ("llama4_QO_proj", [16384, 8192, 8192]),
        ("llama4_KV_proj", [16384, 8192, 1024]),
        ("llama4_FFN", [128000, 8192, 5120]),
        ("llama4_QO_proj", [128000, 8192, 8192]),
        ("llama4_KV_proj", [128000, 8192, 1024]),
    ]


def test_deepseek_v3_236b():
    assert generate({"name": "deepseek_v3_236b"}) == [
        ("deepseek_v3_236b_FFN", [16384, 1536, 5120]),
        ("deepseek_v3_236b_QKVO_proj", [16384, 7168, 7168]),
        ("deepseek_v3_236b_FFN", [128000, 1536, 5120]),
        ("deepseek_v3_236b_QKVO_proj", [128000, 7168, 7168]),
    ]


def test_deepseek_v3_671b():
    assert generate({"name": "deepseek_v3_671b"}) == [
        ("deepseek_v3_671b_FFN", [16384, 2048, 7168]),
        ("deepseek_v3_671b_QKVO_proj", [16384, 7168, 7168]),
        ("deepseek_v3_671b_FFN", [128000, 2048, 7168]),
        ("deepseek_v3_671b_QKVO_proj", [128000, 7168, 7168]),
    ]


def test_qwen3_32b():
    assert generate({"name": "qwen3_32b"}) == [
        ("qwen3_32b_QO_proj", [16384, 5120, 5120]),
        ("qwen3_32b_KV_proj", [16384, 5120, 640]),
        ("qwen3_32b_QO_proj", [128000, 5120, 5120]),
        ("qwen3_32b_KV_proj", [128000, 5120, 640]),
    ]


def test_gemma3_27b():
    assert generate({"name": "gemma3_27b"}) == [
        ("gemma3_27b_QO_proj", [16384, 4096, 4096]),
        ("gemma3_27b_KV_proj", [16384, 4096, 1024]),
        ("gemma3_27b_QO_proj", [128000, 4096, 4096]),
        ("gemma3_27b_KV_proj", [128000, 4096, 1024]),
    ]


def test_model_shapes_ignore_powers_and_custom_shapes():
    assert generate({"name": "gemma3_27b", "min_power": 1, "max_power": 2,
                     "shapes": [[1, 2, 3]]}) == generate({"name": "gemma3_27b"})


def test_every_generator_of_torchao_is_known():
    # get_shapes_for_config's branches at dbef6992 (its NotImplementedError lists them).
    from workflow.suite.shapes import GENERATORS

    assert set(GENERATORS) == {"custom", "llama", "llama4", "deepseek_v3_236b",
                               "deepseek_v3_671b", "qwen3_32b", "gemma3_27b", "pow2",
                               "pow2_extended", "small_sweep", "sweep"}
