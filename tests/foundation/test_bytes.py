"""KV cache and weight bytes: GQA/MLA/sliding-window aware, checked against published figures."""

from __future__ import annotations

import pytest

from flopwise import count_params, load_model
from flopwise.errors import FlopwiseError
from flopwise.workload import kv_cache_bytes, kv_cache_bytes_per_token, weight_bytes
from flopwise.workload.memory_bytes import TRAINING_RECIPES, get_recipe, storage_bytes


def test_llama_70b_kv_cache_is_gqa_aware() -> None:
    # 2 (K,V) x 80 layers x 8 KV heads x 128 dim x 2 bytes = 327,680 B/token (0.3125 MiB);
    # a naive MHA count (64 heads) would be 8x larger.
    assert kv_cache_bytes_per_token(load_model("llama-3.1-70b")) == 327_680


def test_deepseek_v3_caches_the_latent() -> None:
    # MLA: (kv_lora_rank 512 + rope 64) x 61 layers x 2 bytes = 70,272 B/token (arXiv:2405.04434)
    assert kv_cache_bytes_per_token(load_model("deepseek-v3")) == 576 * 61 * 2


def test_sliding_window_layers_cap_at_window() -> None:
    spec = load_model("gpt-oss-120b")
    assert spec.sliding_layers == 18 and spec.sliding_window == 128
    small = kv_cache_bytes(spec, 100)
    assert small == kv_cache_bytes_per_token(spec) * 100
    big = kv_cache_bytes(spec, 10_000)
    per_layer = kv_cache_bytes_per_token(spec) / spec.layers
    assert big == pytest.approx(per_layer * (18 * 10_000 + 18 * 128))


def test_weight_bytes_by_dtype() -> None:
    c = count_params(load_model("llama-3.1-8b"))
    assert weight_bytes(c, "bf16") == 2 * c.total
    # int4 weight-only: one fp16 scale per group of 128 weights (AWQ/GPTQ, int4_awq)
    assert weight_bytes(c, "int4") == pytest.approx(c.total * (4 + 16 / 128) / 8)
    assert weight_bytes(c, "bfloat16") == 2 * c.total


@pytest.mark.parametrize(
    ("dtype", "bits"),
    [
        ("nvfp4", 4 + 8 / 16),  # E2M1 + one E4M3 scale per 16 elements
        ("fp4", 4 + 8 / 16),  # "fp4" is NVFP4
        ("mxfp4", 4 + 8 / 32),  # OCP MX: one E8M0 scale per 32 elements
        ("mxfp8", 8 + 8 / 32),
        ("fp8", 8),  # per-tensor scale: nothing per element
        ("bf16", 16),
    ],
)
def test_storage_bytes_count_block_scales(dtype: str, bits: float) -> None:
    assert storage_bytes(dtype) == pytest.approx(bits / 8)


def test_nvfp4_matches_nvidias_published_footprint() -> None:
    # NVIDIA, "Introducing NVFP4...": ~3.5x smaller than FP16 and ~1.8x smaller than FP8
    assert 2 / storage_bytes("nvfp4") == pytest.approx(3.5, abs=0.1)
    assert 1 / storage_bytes("nvfp4") == pytest.approx(1.8, abs=0.05)


def test_seed_recipe_is_18_bytes() -> None:
    assert TRAINING_RECIPES["bf16-adam"].total == 18
    with pytest.raises(FlopwiseError, match="unknown training recipe"):
        get_recipe("adamw-magic")
