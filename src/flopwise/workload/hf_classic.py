"""``config.json`` normalisers for the GPT-era architectures (GPT-2, GPT-J, GPT-NeoX, BLOOM, OPT,
Falcon, MPT): learned or ALiBi positions, biased linears, LayerNorm, ungated MLPs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.workload.hf_reader import Config
from flopwise.workload.hf_reader import ConfigReader as _Reader


def _attention_dims(
    hidden: int, heads: int, layers: int, kv_heads: int | None = None
) -> dict[str, Any]:
    """The layer count and attention shape every GPT-era config shares: heads of hidden/heads
    (v likewise), kv_heads = heads unless the attention groups them, an ungated MLP."""
    head_dim = hidden // heads
    return {
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "kv_heads": heads if kv_heads is None else kv_heads,
        "head_dim": head_dim,
        "v_head_dim": head_dim,
        "gated_mlp": False,
    }


def _gpt2(name: str, cfg: Config) -> dict[str, Any]:
    r = _Reader(name, cfg)
    hidden = r.int("n_embd", "hidden_size")
    heads = r.int("n_head", "num_attention_heads")
    return {
        **_attention_dims(hidden, heads, r.int("n_layer", "num_hidden_layers")),
        "vocab": r.int("vocab_size"),
        "ffn": r.int("n_inner", default=4 * hidden),
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
        **_attention_dims(hidden, heads, r.int("n_layer")),
        "vocab": r.int("vocab_size"),
        "ffn": r.int("n_inner", default=4 * hidden),
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
        **_attention_dims(hidden, heads, r.int("n_layer", "num_hidden_layers")),
        "vocab": r.int("vocab_size"),
        "ffn": 4 * hidden,
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
        **_attention_dims(hidden, heads, r.int("num_hidden_layers")),
        "vocab": r.int("vocab_size"),
        "ffn": r.int("ffn_dim"),
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
        **_attention_dims(hidden, heads, r.int("num_hidden_layers", "n_layer"), kv_heads=kv),
        "vocab": r.int("vocab_size"),
        "ffn": r.int("ffn_hidden_size", default=4 * hidden),
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
        **_attention_dims(hidden, heads, r.int("n_layers"), kv_heads=kv),
        "vocab": r.int("vocab_size"),
        "ffn": int(r.int("ffn_hidden_size", default=int(ratio * hidden))),
        "linear_bias": not no_bias,
        "norm": "layernorm_nobias" if no_bias else "layernorm",
        "tied_embeddings": True,
        "learned_positions": 0 if attn.get("alibi", False) else r.int("max_seq_len", default=2048),
        "max_seq_len": r.int("max_seq_len", default=2048),
    }


#: model_type -> normaliser (Falcon's early checkpoints name themselves RefinedWeb*).
CLASSIC_NORMALISERS: Mapping[str, Callable[[str, Config], dict[str, Any]]] = {
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
