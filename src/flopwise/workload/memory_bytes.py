"""Bytes: weights per dtype, KV cache per token (GQA/MLA/sliding-window aware), training state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.workload.params import ParamCounts
from flopwise.workload.spec import ModelSpec

#: Bytes per element for weight / KV / activation dtypes: the elements alone. A block-scaled
#: format also stores its scales (SCALE_BYTES_PER_ELEMENT; storage_bytes adds them).
DTYPE_BYTES: Mapping[str, float] = MappingProxyType(
    {
        "fp32": 4.0,
        "tf32": 4.0,
        "bf16": 2.0,
        "fp16": 2.0,
        "fp8": 1.0,
        "mxfp8": 1.0,
        "int8": 1.0,
        "int4": 0.5,
        "fp4": 0.5,  # NVFP4 (E2M1 elements)
        "mxfp4": 0.5,  # OCP MXFP4 (E2M1 elements)
    }
)

#: Scale bytes each element carries in a block-scaled or group-quantized format, by the
#: formats' definitions:
#: - fp4 (NVFP4, the FP4 of TensorRT-LLM, vLLM and SGLang on NVIDIA): one FP8 E4M3 scale per 16
#:   elements (plus one FP32 per tensor), 4.5 bits per value; NVIDIA's "Introducing NVFP4 for
#:   Efficient and Accurate Low-Precision Inference" (2025): about 3.5x smaller than FP16 and
#:   1.8x smaller than FP8 (16 / 4.5 = 3.56, 8 / 4.5 = 1.78).
#: - mxfp4, mxfp8 (OCP Microscaling Formats v1.0): one E8M0 scale per 32 elements, 4.25 / 8.25
#:   bits.
#: - int4 (weight-only AWQ/GPTQ, TensorRT-LLM int4_awq): one fp16 scale per group of 128
#:   weights, 4.125 bits (GPTQ's packed 4-bit zero points add 0.03 bits more, not counted).
#: Per-tensor and per-channel scales (fp8, int8) are a few bytes per row: not counted.
SCALE_BYTES_PER_ELEMENT: Mapping[str, float] = MappingProxyType(
    {"fp4": 1.0 / 16, "mxfp4": 1.0 / 32, "mxfp8": 1.0 / 32, "int4": 2.0 / 128}
)

_DTYPE_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "float32": "fp32",
        "float": "fp32",
        "bfloat16": "bf16",
        "float16": "fp16",
        "half": "fp16",
        "float8": "fp8",
        "float8_e4m3fn": "fp8",
        "e4m3": "fp8",
        "nvfp4": "fp4",
        "mx-fp8": "mxfp8",
    }
)


def normalize_dtype(name: str, allowed: tuple[str, ...] | None = None) -> str:
    """'bfloat16' -> 'bf16'; a dtype outside `allowed` is a one-line error listing them."""
    key = name.strip().lower()
    key = _DTYPE_ALIASES.get(key, key)
    valid = allowed or tuple(DTYPE_BYTES)
    if key not in valid:
        raise FlopwiseError(f"unknown dtype {name!r}; valid: {', '.join(valid)}")
    return key


#: Bytes one element takes in memory, its block scales included (0.5625 for NVFP4's 4.5 bits).
STORAGE_BYTES: Mapping[str, float] = MappingProxyType(
    {d: b + SCALE_BYTES_PER_ELEMENT.get(d, 0.0) for d, b in DTYPE_BYTES.items()}
)


def storage_bytes(dtype: str) -> float:
    """STORAGE_BYTES of a dtype given by any of its names ('nvfp4', 'bfloat16')."""
    return STORAGE_BYTES[normalize_dtype(dtype)]


def weight_bytes(counts: ParamCounts, dtype: str = "bf16") -> float:
    """Bytes to hold all weights in `dtype`, block and group scales included (storage_bytes)."""
    return counts.total * storage_bytes(dtype)


def kv_bytes_per_token_per_layer(spec: ModelSpec, dtype: str = "bf16") -> float:
    """KV cache bytes one token adds to one full-attention layer.

    GQA/MQA: kv_heads x (d_k + d_v). MLA caches the compressed latent plus the rope key.
    """
    b = DTYPE_BYTES[normalize_dtype(dtype)]
    if spec.is_mla:
        return (spec.kv_lora_rank + spec.qk_rope_head_dim) * b
    return spec.kv_heads * (spec.head_dim + spec.v_head_dim) * b


def kv_cache_bytes_per_token(spec: ModelSpec, dtype: str = "bf16") -> float:
    """KV bytes per token summed over all layers (upper bound when some layers slide)."""
    return spec.layers * kv_bytes_per_token_per_layer(spec, dtype)


def kv_cache_bytes(spec: ModelSpec, tokens: float, dtype: str = "bf16") -> float:
    """KV bytes for one sequence of `tokens` tokens; sliding-window layers keep only the window."""
    per_layer = kv_bytes_per_token_per_layer(spec, dtype)
    full = spec.layers - spec.sliding_layers
    window = min(tokens, spec.sliding_window) if spec.sliding_window else tokens
    return per_layer * (full * tokens + spec.sliding_layers * window)


@dataclass(frozen=True, slots=True)
class TrainingRecipe:
    """Bytes per parameter of training state for one precision recipe, with its source."""

    name: str
    weights: float
    grads: float
    master: float
    optimizer: float
    source: str
    note: str = ""

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.master + self.optimizer

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "weights": self.weights,
            "grads": self.grads,
            "master": self.master,
            "optimizer": self.optimizer,
            "total": self.total,
            "source": self.source,
            "note": self.note,
        }


TRAINING_RECIPES: Mapping[str, TrainingRecipe] = MappingProxyType(
    {
        r.name: r
        for r in (
            TrainingRecipe(
                "bf16-adam",
                2,
                4,
                4,
                8,
                "Rajbhandari et al. 2020 (arXiv:1910.02054) §3.1; stas00/ml-engineering: "
                "'8 bytes for AdamW states, 4 bytes for grads, 4+2 bytes for weights'",
                "bf16 weights, fp32 grads, fp32 master weights, fp32 Adam moments (18 B/param)",
            ),
            TrainingRecipe(
                "bf16-adam-bf16-grads",
                2,
                2,
                4,
                8,
                "ZeRO paper's 16 B/param mixed-precision accounting (arXiv:1910.02054 §3.1)",
                "gradients kept in bf16 (16 B/param)",
            ),
            TrainingRecipe(
                "fp8-adam",
                3,
                4,
                4,
                8,
                "NVIDIA Transformer Engine: bf16 weights plus an fp8 weight copy for GEMMs",
                "fp8 GEMMs with bf16 weights + fp8 cache, fp32 grads/master/Adam (19 B/param)",
            ),
            TrainingRecipe(
                "fp8-deepseek-v3",
                1,
                4,
                4,
                4,
                "DeepSeek-V3 technical report (arXiv:2412.19437) §3.3: fp8 GEMM weights, fp32 "
                "master weights and grads, bf16 AdamW moments",
                "13 B/param",
            ),
            TrainingRecipe("fp32-adam", 4, 4, 0, 8, "plain fp32 training with Adam", "16 B/param"),
        )
    }
)

#: The seed's first-order memory rule of thumb (stas00/ml-engineering, training/model
#: parallelism): training needs 18 B/param, inference 2 B/param, each with 25% headroom.
SEED_TRAIN_BYTES_PER_PARAM = 18.0
SEED_INFER_BYTES_PER_PARAM = 2.0
SEED_HEADROOM = 1.25


def get_recipe(name: str) -> TrainingRecipe:
    recipe = TRAINING_RECIPES.get(name)
    if recipe is None:
        raise FlopwiseError(
            f"unknown training recipe {name!r}; valid: {', '.join(TRAINING_RECIPES)}"
        )
    return recipe
