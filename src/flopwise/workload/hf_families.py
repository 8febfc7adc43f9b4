"""Normalisers for current Hugging Face model families (Gemma 2/3, Phi-3/3.5/4, Llama 4,
Nemotron, DBRX, OLMo 2, Command-R), registered into ``hf.NORMALISERS``.

Each reads the keys of its family's ``config.json`` and falls back, for a key the file leaves
out, to the default of the family's ``transformers`` config class (named beside each default),
because that is what the checkpoint was built with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flopwise.errors import FlopwiseError

Config = Mapping[str, Any]

#: transformers Gemma3TextConfig defaults the published gemma-3 config.json files rely on.
GEMMA3_TEXT_DEFAULTS: Mapping[str, Any] = {
    "vocab_size": 262_208,
    "head_dim": 256,
    "max_position_embeddings": 131_072,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
    "tie_word_embeddings": True,
}
#: transformers Gemma2Config defaults (tie_word_embeddings is implicit in Gemma checkpoints).
GEMMA2_DEFAULTS: Mapping[str, Any] = {"tie_word_embeddings": True, "head_dim": 256}


def _with(cfg: Config, defaults: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(defaults)
    out.update({k: v for k, v in cfg.items() if v is not None})
    return out


def _sliding_count(cfg: Config, layers: int, every: int | None) -> int:
    """Layers using local (sliding-window or chunked) attention: from `layer_types` when the
    config lists them, else every layer but each `every`-th."""
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        return sum(1 for t in types if t in ("sliding_attention", "chunked_attention"))
    if not every:
        return 0
    return layers - layers // every


def _gemma2(name: str, cfg: Config) -> dict[str, Any]:
    from flopwise.workload.hf import _llama_like, _Reader

    cfg = _with(cfg, GEMMA2_DEFAULTS)
    r = _Reader(name, cfg)
    layers = r.int("num_hidden_layers")
    return _llama_like(
        name,
        cfg,
        tied_embeddings=r.bool("tie_word_embeddings", True),
        norms_per_layer=4,  # pre- and post-norms around attention and MLP
        sliding_window=r.int("sliding_window", default=0),
        sliding_layers=_sliding_count(cfg, layers, 2),  # local/global alternate
        attn_logit_softcap=float(cfg.get("attn_logit_softcapping") or 0.0),
    )


def _gemma3(name: str, cfg: Config) -> dict[str, Any]:
    from flopwise.workload.hf import _llama_like, _Reader

    cfg = _with(cfg, GEMMA3_TEXT_DEFAULTS)
    r = _Reader(name, cfg)
    layers = r.int("num_hidden_layers")
    return _llama_like(
        name,
        cfg,
        tied_embeddings=r.bool("tie_word_embeddings", True),
        norms_per_layer=4,
        qk_norm=True,
        sliding_window=r.int("sliding_window", default=0),
        sliding_layers=_sliding_count(cfg, layers, r.int("sliding_window_pattern", default=6)),
        attn_logit_softcap=float(cfg.get("attn_logit_softcapping") or 0.0),
    )


def _phi3(name: str, cfg: Config) -> dict[str, Any]:
    """Phi-3/3.5-mini/Phi-4: Llama-shaped with fused qkv and gate_up (same parameter count)."""
    from flopwise.workload.hf import _llama_like, _Reader

    r = _Reader(name, cfg)
    window = r.int("sliding_window", default=0)
    max_len = r.int("max_position_embeddings", default=4096)
    local = 0 < window < max_len
    return _llama_like(
        name,
        cfg,
        sliding_window=window if local else 0,
        sliding_layers=r.int("num_hidden_layers") if local else 0,
    )


def _phimoe(name: str, cfg: Config) -> dict[str, Any]:
    """Phi-3.5-MoE: Mixtral-shaped experts, LayerNorm, biased attention projections."""
    from flopwise.workload.hf import _llama_like, _Reader

    r = _Reader(name, cfg)
    return _llama_like(
        name,
        cfg,
        norm="layernorm",
        qkv_bias_only=r.bool("attention_bias", True),
        linear_bias=False,
        experts=r.int("num_local_experts"),
        experts_per_token=r.int("num_experts_per_tok"),
        expert_ffn=r.int("intermediate_size"),
    )


def _llama4(name: str, cfg: Config) -> dict[str, Any]:
    """Llama 4 text model: MoE every `interleave_moe_layer_step`-th layer (one routed expert of
    `intermediate_size` plus a shared one), dense layers of `intermediate_size_mlp`; chunked
    attention (chunks of `attention_chunk_size`) on the RoPE layers, global attention on every
    fourth (NoPE) layer. A chunked layer's query sees the keys of its own chunk up to itself
    (transformers' modeling_llama4 chunked attention mask; vLLM's ChunkedLocalAttention), so it
    keeps at most a chunk of KV, like a sliding window of that size, but sees half as many keys
    on average."""
    from flopwise.workload.hf import _llama_like, _Reader

    r = _Reader(name, cfg)
    layers = r.int("num_hidden_layers")
    step = r.int("interleave_moe_layer_step", default=1)
    moe_layers = cfg.get("moe_layers")
    if isinstance(moe_layers, list) and moe_layers:
        moe = {int(i) for i in moe_layers}
    else:
        moe = {i for i in range(layers) if (i + 1) % step == 0}
    nope = cfg.get("no_rope_layers")
    chunk = r.int("attention_chunk_size", default=0)
    if isinstance(nope, list) and len(nope) == layers:
        chunked = sum(1 for flag in nope if flag)  # 1 = RoPE layer = chunked attention
    else:
        chunked = layers - layers // r.int("no_rope_layer_interval", default=4)
    expert = r.int("intermediate_size")
    return _llama_like(
        name,
        cfg,
        ffn=r.int("intermediate_size_mlp", default=expert),
        experts=r.int("num_local_experts"),
        experts_per_token=r.int("num_experts_per_tok"),
        expert_ffn=expert,
        shared_experts=1,
        shared_expert_ffn=expert,
        dense_layers=tuple(i for i in range(layers) if i not in moe),
        sliding_window=chunk,
        sliding_layers=chunked if chunk else 0,
        local_attention="chunked",
    )


def _nemotron(name: str, cfg: Config) -> dict[str, Any]:
    """Nemotron-4 / Minitron: squared-ReLU (not gated) MLP, LayerNorm1p with bias."""
    from flopwise.workload.hf import _llama_like, _Reader

    r = _Reader(name, cfg)
    return _llama_like(
        name,
        cfg,
        gated_mlp=False,
        norm="layernorm",
        linear_bias=r.bool("attention_bias", False) or r.bool("mlp_bias", False),
    )


def _nemotron_h(name: str, cfg: Config) -> dict[str, Any]:
    pattern = cfg.get("hybrid_override_pattern") or ""
    raise FlopwiseError(
        f"config {name}: Nemotron-H is a hybrid of Mamba-2 and attention layers (pattern "
        f"{pattern[:24]!r}...); flopwise models transformer layers only, so its FLOPs and memory "
        "would be wrong"
    )


def _dbrx(name: str, cfg: Config) -> dict[str, Any]:
    from flopwise.workload.hf import _Reader

    r = _Reader(name, cfg)
    attn = _Reader(name + " attn_config", cfg.get("attn_config") or {})
    ffn = _Reader(name + " ffn_config", cfg.get("ffn_config") or {})
    hidden = r.int("d_model")
    heads = r.int("n_heads")
    return {
        "hidden": hidden,
        "layers": r.int("n_layers"),
        "heads": heads,
        "kv_heads": attn.int("kv_n_heads", default=heads),
        "head_dim": hidden // heads,
        "v_head_dim": hidden // heads,
        "vocab": r.int("vocab_size"),
        "ffn": ffn.int("ffn_hidden_size"),
        "norm": "layernorm_nobias",
        "tied_embeddings": r.bool("tie_word_embeddings", False),
        "max_seq_len": r.int("max_seq_len", default=2048),
        "experts": ffn.int("moe_num_experts"),
        "experts_per_token": ffn.int("moe_top_k"),
        "expert_ffn": ffn.int("ffn_hidden_size"),
    }


def _olmo2(name: str, cfg: Config) -> dict[str, Any]:
    """OLMo 2: norms after attention and MLP (two per layer), q/k RMSNorm over full width."""
    from flopwise.workload.hf import _llama_like

    return _llama_like(name, cfg, qk_norm_full=True)


def _cohere(name: str, cfg: Config) -> dict[str, Any]:
    """Command-R(+): parallel attention and MLP behind one bias-free LayerNorm, tied logits."""
    from flopwise.workload.hf import _llama_like, _Reader

    r = _Reader(name, cfg)
    return _llama_like(
        name,
        cfg,
        norm="layernorm_nobias",
        norms_per_layer=1,
        tied_embeddings=r.bool("tie_word_embeddings", True),
        qk_norm_full=r.bool("use_qk_norm", False),
    )


FAMILY_NORMALISERS: Mapping[str, Callable[[str, Config], dict[str, Any]]] = {
    "gemma2": _gemma2,
    "gemma3_text": _gemma3,
    "phi3": _phi3,
    "phimoe": _phimoe,
    "llama4_text": _llama4,
    "nemotron": _nemotron,
    "nemotron_h": _nemotron_h,
    "dbrx": _dbrx,
    "olmo2": _olmo2,
    "cohere": _cohere,
    "cohere2": _cohere,
}

#: Multimodal wrappers whose language model is the nested `text_config` (of this model_type).
TEXT_CONFIG_WRAPPERS: Mapping[str, str] = {
    "gemma3": "gemma3_text",
    "llama4": "llama4_text",
    "kimi_k25": "kimi_k2",  # Kimi K2.5: the K2 language model under a vision wrapper
}


def unwrap_text_config(name: str, cfg: Config) -> Config:
    """The language-model config of a multimodal wrapper (Gemma 3, Llama 4, Kimi K2.5), else
    `cfg`."""
    inner_type = TEXT_CONFIG_WRAPPERS.get(str(cfg.get("model_type")))
    if inner_type is None:
        return cfg
    text = cfg.get("text_config")
    if not isinstance(text, Mapping):
        raise FlopwiseError(f"config {name}: model_type {cfg['model_type']!r} has no text_config")
    out = dict(text)
    out.setdefault("model_type", inner_type)
    if "tie_word_embeddings" in cfg and "tie_word_embeddings" not in out:
        out["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    return out
