"""Hugging Face ``config.json`` -> ModelSpec, one small normaliser per ``model_type``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.workload.hf_classic import CLASSIC_NORMALISERS
from flopwise.workload.hf_reader import Config
from flopwise.workload.hf_reader import ConfigReader as _Reader
from flopwise.workload.spec import ModelSpec


def _llama_like(name: str, cfg: Config, **overrides: Any) -> dict[str, Any]:
    r = _Reader(name, cfg)
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads")
    head_dim = r.int("head_dim", default=hidden // heads)
    out: dict[str, Any] = {
        "hidden": hidden,
        "layers": r.int("num_hidden_layers"),
        "heads": heads,
        "kv_heads": r.int("num_key_value_heads", default=heads),
        "head_dim": head_dim,
        "v_head_dim": head_dim,
        "vocab": r.int("vocab_size"),
        "ffn": r.int("intermediate_size"),
        "tied_embeddings": r.bool("tie_word_embeddings", False),
        "max_seq_len": r.int("max_position_embeddings", default=2048),
        "linear_bias": r.bool("attention_bias", False) or r.bool("mlp_bias", False),
    }
    out.update(overrides)
    return out


def _llama(name: str, cfg: Config) -> dict[str, Any]:
    return _llama_like(name, cfg)


def _qwen2(name: str, cfg: Config) -> dict[str, Any]:
    return _llama_like(name, cfg, qkv_bias_only=True, linear_bias=False)


def _mixtral(name: str, cfg: Config) -> dict[str, Any]:
    r = _Reader(name, cfg)
    return _llama_like(
        name,
        cfg,
        experts=r.int("num_local_experts"),
        experts_per_token=r.int("num_experts_per_tok"),
        expert_ffn=r.int("intermediate_size"),
    )


def _qwen_moe(name: str, cfg: Config) -> dict[str, Any]:
    r = _Reader(name, cfg)
    layers = r.int("num_hidden_layers")
    step = r.int("decoder_sparse_step", default=1)
    mlp_only = {int(i) for i in cfg.get("mlp_only_layers") or []}
    dense = tuple(i for i in range(layers) if i in mlp_only or (i + 1) % step != 0)
    shared_ffn = r.int("shared_expert_intermediate_size", default=0)
    qwen3 = cfg.get("model_type") == "qwen3_moe"
    return _llama_like(
        name,
        cfg,
        qkv_bias_only=not qwen3,
        linear_bias=qwen3 and r.bool("attention_bias", False),
        qk_norm=qwen3,
        experts=r.int("num_experts"),
        experts_per_token=r.int("num_experts_per_tok"),
        expert_ffn=r.int("moe_intermediate_size"),
        shared_experts=1 if shared_ffn else 0,
        shared_expert_ffn=shared_ffn,
        shared_expert_gate=bool(shared_ffn),
        dense_layers=dense,
    )


def _qwen3(name: str, cfg: Config) -> dict[str, Any]:
    return _llama_like(name, cfg, qk_norm=True)


def _deepseek(name: str, cfg: Config) -> dict[str, Any]:
    r = _Reader(name, cfg)
    layers = r.int("num_hidden_layers")
    first_dense = r.int("first_k_dense_replace", default=0)
    freq = r.int("moe_layer_freq", default=1)
    experts = r.int("n_routed_experts", default=0)
    dense = tuple(i for i in range(layers) if i < first_dense or i % freq != 0)
    nope = r.int("qk_nope_head_dim")
    rope = r.int("qk_rope_head_dim")
    heads = r.int("num_attention_heads")
    return {
        "hidden": r.int("hidden_size"),
        "layers": layers,
        "heads": heads,
        "kv_heads": heads,
        "head_dim": nope + rope,
        "v_head_dim": r.int("v_head_dim"),
        "vocab": r.int("vocab_size"),
        "ffn": r.int("intermediate_size"),
        "tied_embeddings": r.bool("tie_word_embeddings", False),
        "max_seq_len": r.int("max_position_embeddings", default=4096),
        "q_lora_rank": r.int("q_lora_rank", default=0),
        "kv_lora_rank": r.int("kv_lora_rank"),
        "qk_rope_head_dim": rope,
        "experts": experts,
        "experts_per_token": r.int("num_experts_per_tok", default=0) if experts else 0,
        "expert_ffn": r.int("moe_intermediate_size", default=0) if experts else 0,
        "shared_experts": r.int("n_shared_experts", default=0) if experts else 0,
        "shared_expert_ffn": r.int("moe_intermediate_size", default=0) if experts else 0,
        "dense_layers": dense if experts else (),
        # DeepSeek-V3's router carries a per-expert score-correction bias.
        "router_bias": cfg.get("topk_method") == "noaux_tc",
        # group-limited routing: V2's group_limited_greedy, V3's noaux_tc (its n_group groups
        # are the node groups of "node-limited routing", arXiv:2412.19437 §2.1.2)
        **_expert_groups(r, cfg, experts),
        "extra_layers_excluded": r.int("num_nextn_predict_layers", default=0),
    }


def _expert_groups(r: _Reader, cfg: Config, experts: int) -> dict[str, int]:
    groups = r.int("n_group", default=0) if experts else 0
    limited = cfg.get("topk_method") in ("group_limited_greedy", "noaux_tc")
    if not limited or groups <= 1:
        return {}
    return {
        "expert_groups": groups,
        "expert_groups_per_token": r.int("topk_group", default=groups),
    }


def _gpt_oss(name: str, cfg: Config) -> dict[str, Any]:
    r = _Reader(name, cfg)
    layer_types = cfg.get("layer_types") or []
    sliding = sum(1 for t in layer_types if t == "sliding_attention")
    return _llama_like(
        name,
        cfg,
        linear_bias=r.bool("attention_bias", True),
        experts=r.int("num_local_experts"),
        experts_per_token=r.int("num_experts_per_tok", "experts_per_token"),
        expert_ffn=r.int("intermediate_size"),
        router_bias=True,
        expert_bias=True,
        sliding_window=r.int("sliding_window", default=0),
        sliding_layers=sliding,
        attention_sinks=True,
    )


NORMALISERS: Mapping[str, Callable[[str, Config], dict[str, Any]]] = {
    "llama": _llama,
    "mistral": _llama,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "mixtral": _mixtral,
    "qwen2_moe": _qwen_moe,
    "qwen3_moe": _qwen_moe,
    "deepseek_v3": _deepseek,
    "deepseek_v2": _deepseek,
    # Moonshot's Kimi K2: DeepseekV3ForCausalLM under its own model_type (MLA, 384 routed
    # experts, one shared, first layer dense)
    "kimi_k2": _deepseek,
    "gpt_oss": _gpt_oss,
    **CLASSIC_NORMALISERS,
}


def _all_normalisers() -> Mapping[str, Callable[[str, Config], dict[str, Any]]]:
    from flopwise.workload.hf_families import FAMILY_NORMALISERS, TEXT_CONFIG_WRAPPERS

    return {**NORMALISERS, **FAMILY_NORMALISERS, **dict.fromkeys(TEXT_CONFIG_WRAPPERS, _llama)}


def spec_from_config(name: str, cfg: Config) -> ModelSpec:
    """Normalise a Hugging Face config dict into a ModelSpec (one-line error when unsupported)."""
    from flopwise.workload.hf_families import unwrap_text_config

    supported = _all_normalisers()
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise FlopwiseError(
            f"config {name}: no 'model_type'; supported: {', '.join(sorted(supported))}"
        )
    cfg = unwrap_text_config(name, cfg)
    model_type = str(cfg.get("model_type"))
    normalise = supported.get(model_type)
    if normalise is None:
        raise FlopwiseError(
            f"config {name}: model_type {model_type!r} is not supported; supported: "
            f"{', '.join(sorted(supported))}"
        )
    try:
        fields = normalise(name, cfg)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, FlopwiseError):
            raise
        raise FlopwiseError(f"config {name}: malformed field ({exc})") from None
    return ModelSpec(name=name, model_type=model_type, **fields)


def load_model(name: str) -> ModelSpec:
    """A catalog id, alias, Hugging Face repo name or path to a config.json -> ModelSpec."""
    from flopwise.catalog.models import resolve_model_config

    ident, cfg, _ = resolve_model_config(name)
    return spec_from_config(ident, cfg)
