"""Typed, validated access to the fields of a Hugging Face ``config.json``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from flopwise.errors import FlopwiseError

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


class ConfigReader:
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
