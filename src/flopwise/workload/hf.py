"""Hugging Face ``config.json`` -> ModelSpec, one small normaliser per ``model_type``."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.workload.spec import ModelSpec

Config = Mapping[str, Any]


#: Sizes and counts a transformer cannot have zero (or fewer) of; a hostile or broken config
#: with 0 here would divide by zero further on.
_AT_LEAST_ONE = frozenset(
    {
        "hidden_size", "n_embd", "d_model", "num_attention_heads", "n_head",
        "num_key_value_heads", "num_hidden_layers", "n_layer", "vocab_size",
        "intermediate_size", "ffn_dim", "n_inner", "moe_intermediate_size", "head_dim",
        "max_position_embeddings", "seq_length", "n_positions", "num_experts_per_tok",
        "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
    }
)  # fmt: skip


class _Reader:
    """Typed access to config fields with one-line errors naming the field."""

    def __init__(self, name: str, cfg: Config) -> None:
        self.name = name
        self.cfg = cfg

    def int(self, *keys: str, default: int | None = None) -> int:
        for key in keys:
            value = self.cfg.get(key)
            if value is None:
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value != int(value)
            ):
                raise FlopwiseError(f"config {self.name}: {key}={value!r} must be a whole number")
            if key in _AT_LEAST_ONE and value < 1:
                raise FlopwiseError(f"config {self.name}: {key}={value!r} must be at least 1")
            return int(value)
        if default is None:
            raise FlopwiseError(f"config {self.name}: missing required field {keys[0]!r}")
        return default

    def bool(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise FlopwiseError(f"config {self.name}: {key}={value!r} must be true or false")
        return value


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
        "extra_layers_excluded": r.int("num_nextn_predict_layers", default=0),
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


def _gpt2(name: str, cfg: Config) -> dict[str, Any]:
    r = _Reader(name, cfg)
    hidden = r.int("n_embd", "hidden_size")
    heads = r.int("n_head", "num_attention_heads")
    return {
        "hidden": hidden,
        "layers": r.int("n_layer", "num_hidden_layers"),
        "heads": heads,
        "kv_heads": heads,
        "head_dim": hidden // heads,
        "v_head_dim": hidden // heads,
        "vocab": r.int("vocab_size"),
        "ffn": r.int("n_inner", default=4 * hidden),
        "gated_mlp": False,
        "linear_bias": True,
        "norm": "layernorm",
        "tied_embeddings": r.bool("tie_word_embeddings", True),
        "learned_positions": r.int("n_positions", "n_ctx", default=1024),
        "max_seq_len": r.int("n_positions", "n_ctx", default=1024),
    }


def _gptj(name: str, cfg: Config) -> dict[str, Any]:
    """GPT-J: attention and MLP in parallel off one LayerNorm, rotary on part of each head.

    q/k/v/out carry no bias; the MLP (fc_in/fc_out) and lm_head do (HF modeling_gptj.py). The
    20K MLP bias elements per layer are left out (linear_bias would add attention biases too).
    """
    r = _Reader(name, cfg)
    hidden = r.int("n_embd")
    heads = r.int("n_head")
    return {
        "hidden": hidden,
        "layers": r.int("n_layer"),
        "heads": heads,
        "kv_heads": heads,
        "head_dim": hidden // heads,
        "v_head_dim": hidden // heads,
        "vocab": r.int("vocab_size"),
        "ffn": r.int("n_inner", default=4 * hidden),
        "gated_mlp": False,
        "linear_bias": False,
        "norm": "layernorm",
        "norms_per_layer": 1,
        "tied_embeddings": r.bool("tie_word_embeddings", False),
        "max_seq_len": r.int("n_positions", default=2048),
    }


def _gpt_neox(name: str, cfg: Config) -> dict[str, Any]:
    r = _Reader(name, cfg)
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads")
    # GPT-NeoX configs have neither key; Megatron/NeMo-style exports that reuse the layout
    # (GQA, head_dim x heads != hidden) may carry them
    head_dim = r.int("head_dim", default=hidden // heads)
    return {
        "hidden": hidden,
        "layers": r.int("num_hidden_layers"),
        "heads": heads,
        "kv_heads": r.int("num_key_value_heads", default=heads),
        "head_dim": head_dim,
        "v_head_dim": head_dim,
        "vocab": r.int("vocab_size"),
        "ffn": r.int("intermediate_size", default=4 * hidden),
        "gated_mlp": False,
        "linear_bias": r.bool("attention_bias", True),
        "norm": "layernorm",
        "tied_embeddings": r.bool("tie_word_embeddings", False),
        "max_seq_len": r.int("max_position_embeddings", default=2048),
    }


def _bloom(name: str, cfg: Config) -> dict[str, Any]:
    r = _Reader(name, cfg)
    hidden = r.int("hidden_size", "n_embed")
    heads = r.int("n_head", "num_attention_heads")
    return {
        "hidden": hidden,
        "layers": r.int("n_layer", "num_hidden_layers"),
        "heads": heads,
        "kv_heads": heads,
        "head_dim": hidden // heads,
        "v_head_dim": hidden // heads,
        "vocab": r.int("vocab_size"),
        "ffn": 4 * hidden,
        "gated_mlp": False,
        "linear_bias": True,
        "norm": "layernorm",
        "tied_embeddings": r.bool("tie_word_embeddings", True),
        "embedding_norm": True,
        "max_seq_len": r.int("seq_length", "max_position_embeddings", default=2048),
    }


def _opt(name: str, cfg: Config) -> dict[str, Any]:
    r = _Reader(name, cfg)
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads")
    max_pos = r.int("max_position_embeddings", default=2048)
    if r.int("word_embed_proj_dim", default=hidden) != hidden:
        raise FlopwiseError(
            f"config {name}: word_embed_proj_dim != hidden_size (OPT-350M style) is not supported"
        )
    return {
        "hidden": hidden,
        "layers": r.int("num_hidden_layers"),
        "heads": heads,
        "kv_heads": heads,
        "head_dim": hidden // heads,
        "v_head_dim": hidden // heads,
        "vocab": r.int("vocab_size"),
        "ffn": r.int("ffn_dim"),
        "gated_mlp": False,
        "linear_bias": r.bool("enable_bias", True),
        "norm": "layernorm",
        "tied_embeddings": r.bool("tie_word_embeddings", True),
        "learned_positions": max_pos + 2,  # OPT's learned positions carry an offset of 2
        "max_seq_len": max_pos,
    }


def _falcon(name: str, cfg: Config) -> dict[str, Any]:
    r = _Reader(name, cfg)
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads", "n_head")
    new_arch = r.bool("new_decoder_architecture", False)
    if new_arch:
        kv = r.int("num_kv_heads", "n_head_kv", default=heads)
    else:
        kv = 1 if r.bool("multi_query", True) else heads
    return {
        "hidden": hidden,
        "layers": r.int("num_hidden_layers", "n_layer"),
        "heads": heads,
        "kv_heads": kv,
        "head_dim": hidden // heads,
        "v_head_dim": hidden // heads,
        "vocab": r.int("vocab_size"),
        "ffn": r.int("ffn_hidden_size", default=4 * hidden),
        "gated_mlp": False,
        "linear_bias": r.bool("bias", False),
        "norm": "layernorm",
        # New architecture: separate norms before attention and MLP; old: one shared norm.
        "norms_per_layer": 2 if new_arch or not r.bool("parallel_attn", True) else 1,
        "tied_embeddings": r.bool("tie_word_embeddings", True),
        "max_seq_len": r.int("max_position_embeddings", default=2048),
    }


def _mpt(name: str, cfg: Config) -> dict[str, Any]:
    r = _Reader(name, cfg)
    hidden = r.int("d_model")
    heads = r.int("n_heads")
    ratio = cfg.get("expansion_ratio", 4)
    no_bias = r.bool("no_bias", True)
    attn = cfg.get("attn_config") or {}
    kv = (
        int(attn.get("kv_n_heads") or heads)
        if attn.get("attn_type") == "grouped_query_attention"
        else heads
    )
    return {
        "hidden": hidden,
        "layers": r.int("n_layers"),
        "heads": heads,
        "kv_heads": kv,
        "head_dim": hidden // heads,
        "v_head_dim": hidden // heads,
        "vocab": r.int("vocab_size"),
        "ffn": int(r.int("ffn_hidden_size", default=int(ratio * hidden))),
        "gated_mlp": False,
        "linear_bias": not no_bias,
        "norm": "layernorm_nobias" if no_bias else "layernorm",
        "tied_embeddings": True,
        "learned_positions": 0 if attn.get("alibi", False) else r.int("max_seq_len", default=2048),
        "max_seq_len": r.int("max_seq_len", default=2048),
    }


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
    "gpt_oss": _gpt_oss,
    "gpt2": _gpt2,
    "gptj": _gptj,
    "gpt_neox": _gpt_neox,
    "bloom": _bloom,
    "opt": _opt,
    "falcon": _falcon,
    "RefinedWeb": _falcon,
    "RefinedWebModel": _falcon,
    "mpt": _mpt,
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
