"""The one model of transformer workloads: architecture spec and its accounting."""

from flopwise.workload.flops import (
    TrainFlops,
    attention_flops_per_token,
    decode_flops_per_token,
    megatron_eq3_flops,
    prefill_flops,
    train_flops_per_token,
)
from flopwise.workload.hf import NORMALISERS, load_model, spec_from_config
from flopwise.workload.memory_bytes import (
    DTYPE_BYTES,
    TRAINING_RECIPES,
    TrainingRecipe,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    normalize_dtype,
    weight_bytes,
)
from flopwise.workload.params import ParamCounts, count_params
from flopwise.workload.spec import ModelSpec

__all__ = [
    "DTYPE_BYTES",
    "NORMALISERS",
    "TRAINING_RECIPES",
    "ModelSpec",
    "ParamCounts",
    "TrainFlops",
    "TrainingRecipe",
    "attention_flops_per_token",
    "count_params",
    "decode_flops_per_token",
    "kv_cache_bytes",
    "kv_cache_bytes_per_token",
    "load_model",
    "megatron_eq3_flops",
    "normalize_dtype",
    "prefill_flops",
    "spec_from_config",
    "train_flops_per_token",
    "weight_bytes",
]
