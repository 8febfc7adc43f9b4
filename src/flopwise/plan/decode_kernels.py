"""Names of the decode-attention kernels a serving plan can assume, in a module of its own so the
CLI can offer them without importing the inference planner (start-up time)."""

from __future__ import annotations

#: "grouped": a GQA-aware kernel reading each KV head once (XQA, FlashInfer, FlashDecoding);
#: "per-head": TensorRT-LLM's masked MHA, one CUDA-core pass per query head
#: (plan/infer/constants.py EngineProfile.decode_kernel).
DECODE_KERNELS: tuple[str, ...] = ("grouped", "per-head")
