"""FLOPs per token for training and inference, with the attention convention stated.

Conventions:
- A multiply-add is 2 FLOPs; a token's matmul work is 2 x (weights it multiplies through),
  including the logits projection and excluding embedding look-ups and norms.
- Attention scores and the weighted sum cost 2*heads*(d_qk + d_v) FLOPs per (query, key) pair.
- ``convention="full"`` charges every query against the whole sequence (PaLM App. B, Megatron-LM
  Eq. 3, MosaicML llm-foundry, NeMo): published MFU figures use it, so it is the default.
  ``convention="causal"`` charges only the keys a causal mask keeps (about half; what
  FlashAttention actually computes and what Megatron-LM's newer accounting uses).
- Training = forward + backward (2x forward). Full activation recompute re-runs each layer's
  forward (not the logits); selective recompute re-runs the attention core only; "op"
  (torchtitan's op-level selective checkpointing, parallelize_llama.py _save_list) saves every
  other matmul output and the attention outputs, and re-runs the other matmuls (wk, wo and w3 of
  a gated block; wk, wo and w2 otherwise) and the elementwise ops. MaxText's named remat
  policies (workload/remat.py) re-run what they do not keep: the attention core unless the
  attention output is kept, and the projections whose outputs the backward needs but lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from flopwise.errors import FlopwiseError
from flopwise.workload.params import ParamCounts, count_params
from flopwise.workload.remat import POLICIES, recompute_matmul_params, recomputes_attention
from flopwise.workload.spec import ModelSpec

Convention = Literal["full", "causal"]
CONVENTIONS: tuple[str, ...] = ("full", "causal")
#: Megatron's three, torchtitan's op-level "op", and MaxText's remat policies
RECOMPUTE_MODES: tuple[str, ...] = ("none", "selective", "full", "op", *POLICIES)


def _check(convention: str, recompute: str = "none") -> None:
    if convention not in CONVENTIONS:
        raise FlopwiseError(f"attention convention {convention!r} is not one of {CONVENTIONS}")
    if recompute not in RECOMPUTE_MODES:
        raise FlopwiseError(f"recompute {recompute!r} is not one of {RECOMPUTE_MODES}")


def op_recompute_params(spec: ModelSpec) -> float:
    """Weights per token whose matmuls op-level selective checkpointing re-runs, all layers:
    of a block's matmuls (wq, wk, wv, wo, w1, [w3,] w2) every second one is recomputed."""
    kv = spec.kv_heads * spec.head_dim
    wo = spec.heads * spec.v_head_dim * spec.hidden
    if spec.is_moe:
        ffn = (
            spec.experts_per_token * spec.expert_ffn + spec.shared_experts * spec.shared_expert_ffn
        )
    else:
        ffn = spec.ffn
    return float(spec.layers * (spec.hidden * kv + wo + spec.hidden * ffn))


def attention_flops_per_key(spec: ModelSpec) -> int:
    """Forward FLOPs of one query attending to one key, one layer (QK^T plus AV)."""
    return 2 * spec.heads * (spec.head_dim + spec.v_head_dim)


def _chunks(n: float, window: float) -> tuple[float, float]:
    """(whole chunks, tokens in the last partial chunk) of a sequence of n tokens."""
    whole = n // window
    return whole, n - whole * window


def local_pairs(n: float, window: int, chunked: bool) -> float:
    """(query, key) pairs a causal sequence of n tokens computes in one local-attention layer:
    each query sees at most `window` keys (sliding), or the keys of its own `window`-token chunk
    up to itself (chunked). The difference of two values is the keys of the positions between
    (position P sees local_pairs(P) - local_pairs(P - 1) keys)."""
    if window <= 0 or n <= window:
        return n * (n + 1) / 2
    if chunked:
        whole, rest = _chunks(n, window)
        return whole * window * (window + 1) / 2 + rest * (rest + 1) / 2
    return window * (window + 1) / 2 + (n - window) * window


def _mean_context(seq_len: float, window: float, convention: str, chunked: bool = False) -> float:
    """Mean number of keys a query in a sequence of seq_len sees (window 0 = unlimited)."""
    limit = seq_len if window <= 0 else min(seq_len, window)
    if convention == "full":
        if chunked and seq_len > window > 0:  # each query charged against its whole chunk
            whole, rest = _chunks(seq_len, window)
            return (whole * window * window + rest * rest) / seq_len
        return limit
    return local_pairs(seq_len, int(window), chunked) / seq_len


def attention_flops_per_token(spec: ModelSpec, seq_len: float, convention: str = "full") -> float:
    """Forward attention-core FLOPs per token, averaged over a sequence of seq_len tokens."""
    _check(convention)
    full_layers = spec.layers - spec.sliding_layers
    keys = full_layers * _mean_context(seq_len, 0, convention)
    chunked = spec.local_attention == "chunked"
    keys += spec.sliding_layers * _mean_context(seq_len, spec.sliding_window, convention, chunked)
    return attention_flops_per_key(spec) * keys


@dataclass(frozen=True, slots=True)
class AttentionSplit:
    """One kind of layer's share of a causal sequence's attention-core FLOPs: its window in
    tokens (0 = the whole sequence) and whether that window is a chunk (Llama 4) or slides."""

    share: float
    window: int
    chunked: bool = False


def causal_attention_split(spec: ModelSpec, seq_len: float) -> tuple[AttentionSplit, ...]:
    """How a causal sequence of seq_len tokens splits its attention-core FLOPs between the layer
    kinds, full layers first; one entry when every layer sees the whole sequence (no local
    layers, or a window at least seq_len long). The shares add up to 1."""
    full_layers = spec.layers - spec.sliding_layers
    window = spec.sliding_window
    if spec.sliding_layers == 0 or window <= 0 or window >= seq_len:
        return (AttentionSplit(1.0, 0),)
    chunked = spec.local_attention == "chunked"
    full = full_layers * _mean_context(seq_len, 0, "causal")
    local = spec.sliding_layers * _mean_context(seq_len, window, "causal", chunked)
    total = full + local
    return (AttentionSplit(full / total, 0), AttentionSplit(local / total, window, chunked))


def attention_flops_at_context(spec: ModelSpec, context: float) -> float:
    """Forward attention FLOPs for one new token attending to `context` cached tokens."""
    full_layers = spec.layers - spec.sliding_layers
    window = spec.sliding_window
    if window <= 0 or context <= window:
        local = context
    elif spec.local_attention == "chunked":
        local = (context - 1) % window + 1  # the new token's position within its chunk
    else:
        local = window
    keys = full_layers * context + spec.sliding_layers * local
    return attention_flops_per_key(spec) * keys


@dataclass(frozen=True, slots=True)
class TrainFlops:
    """Per-token training FLOPs. `model` is MFU's numerator; `hardware` adds recompute."""

    matmul_forward: float
    attention_forward: float
    model: float  # 3 x (matmul + attention) forward
    hardware: float  # model + recompute
    recompute: float
    six_n: float  # the 6N rule of thumb with N = active parameters
    convention: str
    seq_len: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "per_token": self.model,
            "per_token_with_recompute": self.hardware,
            "recompute_per_token": self.recompute,
            "matmul_forward_per_token": self.matmul_forward,
            "attention_forward_per_token": self.attention_forward,
            "six_n_per_token": self.six_n,
            "attention_convention": self.convention,
            "seq_len": self.seq_len,
        }


def train_flops_per_token(
    spec: ModelSpec,
    seq_len: int,
    *,
    recompute: str = "none",
    convention: str = "full",
    counts: ParamCounts | None = None,
    remat_tensors: tuple[tuple[str, str], ...] = (),
) -> TrainFlops:
    """Training FLOPs per token: 3 passes of matmuls and attention, plus recompute if any
    (``remat_tensors``: the per-tensor choices of MaxText's ``custom`` policy)."""
    _check(convention, recompute)
    if seq_len <= 0:
        raise FlopwiseError(f"sequence length must be positive, got {seq_len}")
    c = counts or count_params(spec)
    matmul = 2.0 * c.matmul_active
    attn = attention_flops_per_token(spec, seq_len, convention)
    model = 3.0 * (matmul + attn)
    if recompute in POLICIES:
        extra = 2.0 * recompute_matmul_params(spec, recompute, remat_tensors)
        extra += attn if recomputes_attention(recompute, remat_tensors) else 0.0
    else:
        extra = {
            "none": 0.0,
            "selective": attn,
            "full": 2.0 * c.layer_matmul_active + attn,
            "op": 2.0 * op_recompute_params(spec),
        }[recompute]
    return TrainFlops(
        matmul_forward=matmul,
        attention_forward=attn,
        model=model,
        hardware=model + extra,
        recompute=extra,
        six_n=6.0 * c.active,
        convention=convention,
        seq_len=seq_len,
    )


def prefill_flops(spec: ModelSpec, prompt_len: int, counts: ParamCounts | None = None) -> float:
    """FLOPs to prefill one prompt of prompt_len tokens (causal attention, logits for all)."""
    c = counts or count_params(spec)
    matmul = 2.0 * c.matmul_active * prompt_len
    attn = attention_flops_per_token(spec, prompt_len, "causal") * prompt_len
    return matmul + attn


def decode_flops_per_token(
    spec: ModelSpec, kv_len: float, counts: ParamCounts | None = None
) -> float:
    """FLOPs to generate one token with kv_len tokens already in the cache."""
    c = counts or count_params(spec)
    return 2.0 * c.matmul_active + attention_flops_at_context(spec, kv_len + 1)


def megatron_eq3_flops(
    batch: int, seq_len: int, layers: int, hidden: int, vocab: int, recompute: bool = True
) -> float:
    """Narayanan et al. 2021 (arXiv:2104.04473) Eq. 3: FLOPs per iteration of a GPT model.

    96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h)) with full recompute; 72 instead of 96 without.
    """
    coeff = 96 if recompute else 72
    logits = vocab / ((16 if recompute else 12) * layers * hidden)
    return coeff * batch * seq_len * layers * hidden**2 * (1 + seq_len / (6 * hidden) + logits)
