"""Everything `flopwise model` shows about a model: parameters, FLOPs, bytes, in one object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.workload.flops import (
    attention_flops_at_context,
    decode_flops_per_token,
    prefill_flops,
    train_flops_per_token,
)
from flopwise.workload.memory_bytes import (
    DTYPE_BYTES,
    TRAINING_RECIPES,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    weight_bytes,
)
from flopwise.workload.params import ParamCounts, count_params
from flopwise.workload.spec import ModelSpec

WEIGHT_DTYPES: tuple[str, ...] = ("bf16", "fp8", "int8", "int4")
KV_DTYPES: tuple[str, ...] = ("bf16", "fp8", "int8")


@dataclass(frozen=True, slots=True)
class ModelReport:
    spec: ModelSpec
    counts: ParamCounts
    seq_len: int
    convention: str

    def to_dict(self) -> dict[str, Any]:
        spec, c, s = self.spec, self.counts, self.seq_len
        train = {
            mode: train_flops_per_token(
                spec, s, recompute=mode, convention=self.convention, counts=c
            )
            for mode in ("none", "selective", "full")
        }
        train_no_attn = 6.0 * c.matmul_active
        return {
            "model": spec.name,
            "model_type": spec.model_type,
            "architecture": spec.to_dict(),
            "params": c.total,
            "active_params": c.active,
            "breakdown": c.breakdown(),
            "seq_len": s,
            "attention_convention": self.convention,
            "train_flops_per_token": train["none"].model,
            "train_flops_per_token_no_attention": train_no_attn,
            "train_flops_per_token_selective_recompute": train["selective"].hardware,
            "train_flops_per_token_full_recompute": train["full"].hardware,
            "six_n_flops_per_token": 6.0 * c.active,
            "prefill_flops_per_token": prefill_flops(spec, s, c) / s,
            "decode_flops_per_token": decode_flops_per_token(spec, s - 1, c),
            "decode_attention_flops_per_token": attention_flops_at_context(spec, s),
            "weight_bytes": {d: weight_bytes(c, d) for d in WEIGHT_DTYPES},
            "kv_cache_bytes_per_token": kv_cache_bytes_per_token(spec, "bf16"),
            "kv_cache_bytes_per_token_by_dtype": {
                d: kv_cache_bytes_per_token(spec, d) for d in KV_DTYPES
            },
            "kv_cache_bytes_at_seq_len": kv_cache_bytes(spec, s, "bf16"),
            "training_state_bytes": {
                name: {"bytes_per_param": r.total, "total_bytes": r.total * c.total}
                for name, r in TRAINING_RECIPES.items()
            },
        }


def describe_model(
    spec: ModelSpec, seq_len: int | None = None, convention: str = "full"
) -> ModelReport:
    """Account a model at a sequence length (default: min(context, 4096))."""
    s = seq_len or min(spec.max_seq_len, 4096)
    if s <= 0:
        raise FlopwiseError(f"--seq-len must be positive, got {s}")
    if s > spec.max_seq_len:
        raise FlopwiseError(
            f"--seq-len {s} exceeds {spec.name}'s context of {spec.max_seq_len} tokens"
        )
    assert DTYPE_BYTES
    return ModelReport(spec=spec, counts=count_params(spec), seq_len=s, convention=convention)
