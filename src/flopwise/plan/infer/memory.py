"""Device memory of a deployment: weights + KV cache + activation workspace + runtime reserve.

Per GPU: the weights on the fullest rank (its layers' share plus embedding / output projection),
the KV cache of `batch` sequences of input+output tokens (GQA/MQA: KV heads only, split over TP
ranks or replicated when fewer than ranks; MLA: the compressed latent on every rank), a transient
workspace for the largest forward pass (capped by the engine's max_num_tokens) plus the logits,
and the runtime's own memory. The engine may use `memory_fraction` of the device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from flopwise.plan.infer.constants import (
    ACTIVATION_HIDDEN_BUFFERS,
    RUNTIME_RESERVED_BYTES,
    EngineProfile,
)
from flopwise.plan.infer.shard import Shard
from flopwise.plan.infer.trtllm_build import slot_buffer_bytes
from flopwise.units import GIB


def kv_bytes_per_seq_per_gpu(sh: Shard, tokens: float) -> float:
    """KV bytes one sequence of `tokens` tokens holds on one GPU: sliding-window layers keep
    their window; chunked layers (Llama 4) keep every token, as the engines do by default
    (TensorRT-LLM 1.0 decodes over them; vLLM turned its chunk-freeing hybrid KV cache off for
    chunked local attention, PR #21761, 2025-07, unless
    VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE is set)."""
    s = sh.spec
    full = s.layers - s.sliding_layers
    capped = s.sliding_window and s.local_attention == "sliding"
    window = min(tokens, s.sliding_window) if capped else tokens
    per_rank_layers = (full * tokens + s.sliding_layers * window) / s.layers * sh.layers
    return sh.kv_per_token_layer_bytes * per_rank_layers


def workspace_bytes(sh: Shard, tokens: float, seqs: float, act_bytes: float) -> float:
    """Transient activations of one forward pass of `tokens` rows, plus fp32 logits of `seqs`."""
    s = sh.spec
    per_token = (
        ACTIVATION_HIDDEN_BUFFERS * s.hidden
        + sh.qkv_out
        + sh.o_in
        + sh.mlp_up_out
        + sh.mlp_down_in
        + sh.expert_up_out
    ) * max(act_bytes, 2.0)
    return tokens * per_token + seqs * sh.logits_out * 4.0


def usable_bytes(engine: EngineProfile, device_bytes: float | None, fixed: float) -> float | None:
    """Memory the engine lets itself fill: a fraction of the device, or of what `fixed` leaves.

    `fixed` is weights + runtime reserve + the largest activation workspace. With
    ``memory_fraction_of == "free"`` (TensorRT-LLM) the KV cache gets memory_fraction of the
    memory left after them; otherwise (vLLM, SGLang) everything fits in memory_fraction of the
    device.
    """
    if device_bytes is None:
        return None
    if engine.memory_fraction_of == "free":
        return fixed + engine.memory_fraction * max(0.0, device_bytes - fixed)
    return device_bytes * engine.memory_fraction


def engine_fixed_bytes(
    sh: Shard,
    engine: EngineProfile,
    act_bytes: float,
    seq_tokens: float,
    slot_seqs: int | None = None,
    extra_weights_bytes: float = 0.0,
) -> tuple[float, float]:
    """(fixed bytes, of which per-slot buffers) one GPU holds before its KV cache: weights, the
    runtime reserve, the engine's largest forward pass's activations (max_num_tokens) and the
    buffers the runtime sizes per sequence slot (`slot_seqs`, default the engine's)."""
    slots = slot_buffer_bytes(engine, sh.spec.vocab, slot_seqs, seq_tokens)
    # one forward pass on a GPU is one pipeline micro-batch (EngineProfile.micro_batches)
    largest = workspace_bytes(sh, engine.max_num_tokens / engine.micro_batches, 0, act_bytes)
    weights = sh.weights_per_gpu_bytes() + extra_weights_bytes
    return weights + RUNTIME_RESERVED_BYTES + largest + slots, slots


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Bytes per GPU of the fullest rank, and what fits."""

    weights_bytes: float
    kv_bytes: float
    workspace_bytes: float
    reserved_bytes: float
    device_bytes: float | None
    usable_bytes: float | None
    kv_per_seq_bytes: float  # one sequence of input+output tokens, one GPU
    max_batch: int | None  # largest batch that fits (None when device memory is unknown)
    #: buffers the runtime sizes per sequence slot (logits, decoder, sampling), see
    #: EngineProfile.slot_bytes_per_vocab
    slot_buffers_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        return (
            self.weights_bytes
            + self.kv_bytes
            + self.workspace_bytes
            + self.reserved_bytes
            + self.slot_buffers_bytes
        )

    @property
    def fits(self) -> bool | None:
        return None if self.usable_bytes is None else self.total_bytes <= self.usable_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "weights_gib": self.weights_bytes / GIB,
            "kv_cache_gib": self.kv_bytes / GIB,
            "workspace_gib": self.workspace_bytes / GIB,
            "runtime_reserved_gib": self.reserved_bytes / GIB,
            "slot_buffers_gib": self.slot_buffers_bytes / GIB,
            "total_gib": self.total_bytes / GIB,
            "device_gib": None if self.device_bytes is None else self.device_bytes / GIB,
            "usable_gib": None if self.usable_bytes is None else self.usable_bytes / GIB,
            "kv_per_sequence_gib": self.kv_per_seq_bytes / GIB,
            "fits": self.fits,
            "max_batch": self.max_batch,
        }


def plan_memory(
    sh: Shard,
    engine: EngineProfile,
    device_bytes: float | None,
    batch: int,
    seq_tokens: int,
    pass_tokens: float,
    act_bytes: float,
    *,
    kv_tokens_per_seq: float | None = None,
    extra_weights_bytes: float = 0.0,
    extra_kv_per_seq_bytes: float = 0.0,
    slot_seqs: int | None = None,
) -> MemoryPlan:
    """Memory per GPU for `batch` sequences; `kv_tokens_per_seq` defaults to seq_tokens.

    `pass_tokens` is the largest forward pass (capped by engine.max_num_tokens). Continuous
    batching with paged KV passes the mean tokens a running sequence holds instead of the full
    length. `extra_*` add a draft model's weights and KV. `slot_seqs` is the number of sequence
    slots the runtime allocates buffers for (default: the engine's max_num_seqs; a static batch
    is built for exactly its batch).
    """
    per_seq = kv_bytes_per_seq_per_gpu(sh, kv_tokens_per_seq or seq_tokens) + extra_kv_per_seq_bytes
    weights = sh.weights_per_gpu_bytes() + extra_weights_bytes
    tokens = min(pass_tokens, engine.max_num_tokens) / engine.micro_batches
    # a large batch fills the engine's largest forward pass: the fixed part is sized for it
    fixed, slots = engine_fixed_bytes(
        sh, engine, act_bytes, seq_tokens, slot_seqs, extra_weights_bytes
    )
    # logits of the running sequences, unless the runtime holds them per slot already
    work = workspace_bytes(sh, tokens, 0 if slots else batch, act_bytes)
    usable = usable_bytes(engine, device_bytes, fixed)
    max_batch = None
    if usable is not None:
        free = usable - fixed
        # attention data parallelism: a rank holds the KV of 1/attn_dp of the sequences;
        # fp32 logits per running sequence unless the runtime pre-allocated them per slot
        logits = 0.0 if slots else sh.logits_out * 4.0
        per = per_seq / sh.attn_dp + logits
        max_batch = max(0, math.floor(free / per)) if free > 0 else 0
    return MemoryPlan(
        weights_bytes=weights,
        kv_bytes=batch * per_seq / sh.attn_dp,
        workspace_bytes=work,
        reserved_bytes=RUNTIME_RESERVED_BYTES,
        device_bytes=device_bytes,
        usable_bytes=usable,
        kv_per_seq_bytes=per_seq,
        max_batch=max_batch,
        slot_buffers_bytes=slots,
    )
