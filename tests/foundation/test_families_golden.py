"""Current model families load from their Hugging Face configs with published parameter counts.

Shape keys are those of each model's config.json on the Hugging Face Hub (keys a file leaves to
its transformers config class are left out here too). Golden counts: exact where the Hub's
safetensors metadata publishes the count (cited), otherwise the model card's rounded figure with
a tolerance of half a unit in its last digit plus 1% for what the card's rounding hides.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from flopwise.errors import FlopwiseError
from flopwise.workload.hf import load_model, spec_from_config
from flopwise.workload.params import count_params

GEMMA2 = {
    "model_type": "gemma2",
    "head_dim": 256,
    "max_position_embeddings": 8192,
    "sliding_window": 4096,
    "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0,
    "vocab_size": 256000,
}
GEMMA2_2B = {
    **GEMMA2,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_attention_heads": 8,
    "num_hidden_layers": 26,
    "num_key_value_heads": 4,
}
GEMMA2_9B = {
    **GEMMA2,
    "hidden_size": 3584,
    "intermediate_size": 14336,
    "num_attention_heads": 16,
    "num_hidden_layers": 42,
    "num_key_value_heads": 8,
}
GEMMA2_27B = {
    **GEMMA2,
    "head_dim": 128,
    "hidden_size": 4608,
    "intermediate_size": 36864,
    "num_attention_heads": 32,
    "num_hidden_layers": 46,
    "num_key_value_heads": 16,
}
# google/gemma-3-1b-it (text only: gemma3_text)
GEMMA3_1B = {
    "model_type": "gemma3_text",
    "head_dim": 256,
    "hidden_size": 1152,
    "intermediate_size": 6912,
    "num_attention_heads": 4,
    "num_hidden_layers": 26,
    "num_key_value_heads": 1,
    "sliding_window": 512,
    "sliding_window_pattern": 6,
    "max_position_embeddings": 32768,
    "vocab_size": 262144,
}
# google/gemma-3-27b-it: a multimodal wrapper; its text_config leaves vocab_size to the default
GEMMA3_27B = {
    "model_type": "gemma3",
    "text_config": {
        "head_dim": 128,
        "hidden_size": 5376,
        "intermediate_size": 21504,
        "model_type": "gemma3_text",
        "num_attention_heads": 32,
        "num_hidden_layers": 62,
        "num_key_value_heads": 16,
        "query_pre_attn_scalar": 168,
        "sliding_window": 1024,
    },
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152},
}
PHI3_MINI = {
    "model_type": "phi3",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 4096,
    "sliding_window": 2047,
    "vocab_size": 32064,
    "tie_word_embeddings": False,
}
PHI4 = {
    "model_type": "phi3",
    "hidden_size": 5120,
    "intermediate_size": 17920,
    "num_attention_heads": 40,
    "num_hidden_layers": 40,
    "num_key_value_heads": 10,
    "max_position_embeddings": 16384,
    "vocab_size": 100352,
    "tie_word_embeddings": False,
}
PHI35_MOE = {
    "model_type": "phimoe",
    "hidden_size": 4096,
    "intermediate_size": 6400,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 16,
    "num_experts_per_tok": 2,
    "attention_bias": True,
    "max_position_embeddings": 131072,
    "vocab_size": 32064,
}
LLAMA4_TEXT = {
    "model_type": "llama4_text",
    "hidden_size": 5120,
    "head_dim": 128,
    "intermediate_size": 8192,
    "intermediate_size_mlp": 16384,
    "num_attention_heads": 40,
    "num_hidden_layers": 48,
    "num_key_value_heads": 8,
    "num_experts_per_tok": 1,
    "attention_chunk_size": 8192,
    "vocab_size": 202048,
}
LLAMA4_SCOUT = {
    "model_type": "llama4",
    "tie_word_embeddings": False,
    "text_config": {
        **LLAMA4_TEXT,
        "num_local_experts": 16,
        "interleave_moe_layer_step": 1,
        "max_position_embeddings": 10485760,
    },
}
LLAMA4_MAVERICK = {
    "model_type": "llama4",
    "tie_word_embeddings": False,
    "text_config": {
        **LLAMA4_TEXT,
        "num_local_experts": 128,
        "interleave_moe_layer_step": 2,
        "max_position_embeddings": 1048576,
    },
}
QWEN3_8B = {
    "model_type": "qwen3",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
}
QWEN3_235B = {
    "model_type": "qwen3_moe",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "moe_intermediate_size": 1536,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "num_hidden_layers": 94,
    "num_attention_heads": 64,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
}
DEEPSEEK_V2 = {
    "model_type": "deepseek_v2",
    "hidden_size": 5120,
    "intermediate_size": 12288,
    "moe_intermediate_size": 1536,
    "num_hidden_layers": 60,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_shared_experts": 2,
    "n_routed_experts": 160,
    "num_experts_per_tok": 6,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "topk_method": "greedy",
    "vocab_size": 102400,
    "max_position_embeddings": 163840,
}
DBRX = {
    "model_type": "dbrx",
    "d_model": 6144,
    "n_heads": 48,
    "n_layers": 40,
    "max_seq_len": 32768,
    "vocab_size": 100352,
    "attn_config": {"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000},
    "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4},
}
OLMO2_7B = {
    "model_type": "olmo2",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 4096,
    "vocab_size": 100352,
    "tie_word_embeddings": False,
}
COMMAND_R = {
    "model_type": "cohere",
    "hidden_size": 8192,
    "intermediate_size": 22528,
    "num_attention_heads": 64,
    "num_hidden_layers": 40,
    "num_key_value_heads": 64,
    "max_position_embeddings": 8192,
    "vocab_size": 256000,
    "use_qk_norm": False,
}
NEMOTRON4_340B = {
    "model_type": "nemotron",
    "hidden_size": 18432,
    "intermediate_size": 73728,
    "num_attention_heads": 96,
    "num_hidden_layers": 96,
    "num_key_value_heads": 8,
    "max_position_embeddings": 4096,
    "vocab_size": 256000,
    "tie_word_embeddings": False,
}

#: (config, exact total, source) from the Hub's safetensors metadata ("safetensors.total").
EXACT = [
    (GEMMA2_2B, 2_614_341_888, "google/gemma-2-2b"),
    (GEMMA2_9B, 9_241_705_984, "google/gemma-2-9b"),
    (GEMMA2_27B, 27_227_128_320, "google/gemma-2-27b"),
    (GEMMA3_1B, 999_885_952, "google/gemma-3-1b-it"),
    (PHI3_MINI, 3_821_079_552, "microsoft/Phi-3-mini-4k-instruct (and Phi-3.5-mini-instruct)"),
    (PHI4, 14_659_507_200, "microsoft/phi-4"),
    (OLMO2_7B, 7_298_617_344, "allenai/OLMo-2-1124-7B"),
]

#: (config, total, active or None, source): rounded figures from model cards and papers.
ROUNDED: list[tuple[dict[str, Any], float, float | None, str]] = [
    # Llama 4 model card: 17B active, 109B / 400B total. The totals include the ~0.7B vision
    # encoder (not in text_config), so the text model is checked within 2%.
    (LLAMA4_SCOUT, 109e9, 17e9, "meta-llama/Llama-4-Scout-17B-16E model card"),
    (LLAMA4_MAVERICK, 400e9, 17e9, "meta-llama/Llama-4-Maverick-17B-128E model card"),
    (QWEN3_8B, 8.2e9, None, "Qwen/Qwen3-8B model card: 8.2B"),
    (QWEN3_235B, 235e9, 22e9, "Qwen/Qwen3-235B-A22B model card: 235B total, 22B activated"),
    (DEEPSEEK_V2, 236e9, 21e9, "DeepSeek-V2 paper/model card: 236B total, 21B activated"),
    (DBRX, 132e9, 36e9, "databricks/dbrx-base model card: 132B total, 36B active"),
    (COMMAND_R, 35e9, None, "CohereForAI/c4ai-command-r-v01 model card: 35B"),
    (NEMOTRON4_340B, 340e9, None, "Nemotron-4 340B technical report: 340B"),
    (PHI35_MOE, 41.9e9, 6.6e9, "microsoft/Phi-3.5-MoE-instruct card: 6.6B active, 41.9B"),
]


@pytest.mark.parametrize(("cfg", "total", "source"), EXACT, ids=[e[2] for e in EXACT])
def test_exact_published_counts(cfg: dict[str, Any], total: int, source: str) -> None:
    assert count_params(spec_from_config(source, cfg)).total == total


@pytest.mark.parametrize(
    ("cfg", "total", "active", "source"), ROUNDED, ids=[r[3].split()[0] for r in ROUNDED]
)
def test_rounded_published_counts(
    cfg: dict[str, Any], total: float, active: float | None, source: str
) -> None:
    counts = count_params(spec_from_config(source, cfg))
    assert counts.total == pytest.approx(total, rel=0.02)
    if active is not None:
        assert counts.active == pytest.approx(active, rel=0.03)


def test_gemma3_27b_text_model_from_the_multimodal_config() -> None:
    """Gemma 3 technical report, Table 1: 27B has 25,600M non-embedding parameters (and a
    417M vision encoder, which the text model leaves out)."""
    spec = spec_from_config("gemma-3-27b-it", GEMMA3_27B)
    counts = count_params(spec)
    assert spec.vocab == 262_208  # the Gemma3TextConfig default the file relies on
    assert counts.total - counts.embedding == pytest.approx(25_600e6, rel=0.001)
    assert spec.sliding_window == 1024 and spec.sliding_layers == 62 - 62 // 6


def test_gemma2_alternates_local_and_global_attention_with_soft_capping() -> None:
    spec = spec_from_config("gemma-2-9b", GEMMA2_9B)
    assert spec.sliding_window == 4096 and spec.sliding_layers == 21
    assert spec.attn_logit_softcap == 50.0 and spec.tied_embeddings


def test_llama4_layers_interleave_moe_and_chunked_attention() -> None:
    scout = spec_from_config("scout", LLAMA4_SCOUT)
    maverick = spec_from_config("maverick", LLAMA4_MAVERICK)
    assert scout.moe_layers == 48 and maverick.moe_layers == 24
    assert maverick.dense_layers == tuple(range(0, 48, 2))  # MoE on every second layer
    assert scout.sliding_window == 8192 and scout.sliding_layers == 36  # NoPE every 4th: global


def test_sliding_window_shrinks_the_kv_cache_of_long_requests() -> None:
    from flopwise.workload.memory_bytes import kv_cache_bytes

    gemma = spec_from_config("gemma-2-9b", GEMMA2_9B)
    full = spec_from_config("gemma-2-9b", {**GEMMA2_9B, "sliding_window": None})
    assert full.sliding_layers == 21 and full.sliding_window == 0
    assert kv_cache_bytes(gemma, 8192) == pytest.approx(kv_cache_bytes(full, 8192) * 0.75, rel=0.01)


def test_nemotron_h_is_refused_with_the_reason() -> None:
    cfg = {"model_type": "nemotron_h", "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-"}
    with pytest.raises(FlopwiseError, match="Mamba-2"):
        spec_from_config("nemotron-h", cfg)


def _cache_repo(root: Any, repo: str, cfg: dict[str, Any]) -> None:
    import json

    base = root / ("models--" + repo.replace("/", "--"))
    snap = base / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text("abc123", encoding="utf-8")


@pytest.mark.parametrize("env", ["HF_HUB_CACHE", "HF_HOME"])
def test_org_name_resolves_from_the_local_hub_cache(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, env: str
) -> None:
    from flopwise.workload.hf import load_model

    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME"):
        monkeypatch.delenv(var, raising=False)
    cache = tmp_path / "hub"
    monkeypatch.setenv(env, str(cache if env == "HF_HUB_CACHE" else tmp_path))
    _cache_repo(cache, "google/gemma-2-9b-it", GEMMA2_9B)
    spec = load_model("google/gemma-2-9b-it")
    assert count_params(spec).total == 9_241_705_984


def test_missing_repo_says_how_to_get_the_config(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flopwise.workload.hf import load_model

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(
        FlopwiseError, match=r"huggingface-cli download Qwen/Qwen2\.5-14B config\.json"
    ):
        load_model("Qwen/Qwen2.5-14B")


def test_kimi_k2_configs_normalise_as_deepseek_v3_architecture() -> None:
    # Kimi K2 ships DeepseekV3ForCausalLM under model_type "kimi_k2"; Kimi K2.5 wraps the same
    # language model in a vision config (text_config of model_type "kimi_k2")
    k2 = load_model("kimi-k2")
    assert k2.model_type == "kimi_k2" and k2.is_mla and k2.is_moe
    assert (k2.experts, k2.experts_per_token, k2.shared_experts) == (384, 8, 1)
    assert k2.dense_layers == (0,) and k2.layers == 61
    cfg = json.loads(
        (resources.files("flopwise.catalog") / "data/models/kimi-k2.json").read_text("utf-8")
    )
    wrapped = spec_from_config("kimi-k2.5", {"model_type": "kimi_k25", "text_config": cfg})
    assert count_params(wrapped).total == count_params(k2).total
