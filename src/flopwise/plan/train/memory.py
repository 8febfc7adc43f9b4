"""Memory per GPU for one layout: training state, activations, buffers and overhead.

Training state (Rajbhandari et al. 2020, arXiv:1910.02054): weights, gradients, fp32 master
weights and optimizer moments per the precision recipe, sharded over the data-parallel group
(times CP, as Megatron's distributed optimizer does) by ZeRO stage: 1 shards master weights and
optimizer, 2 also gradients, 3 also weights. Expert weights are split by EP and sharded over
the expert-data-parallel group (dp*cp/ep).

Activations (Korthikanti et al. 2022, arXiv:2205.05198, Table 2) per layer, per token, 16-bit,
adapted: no dropout masks (modern LLMs train without dropout), FlashAttention stores the
output and log-sum-exp instead of the s^2 score matrix, GQA shrinks K/V, gated MLPs keep gate,
up and product (3f) instead of 2f. Hidden-sized tensors (norm inputs, the inputs of the QKV and
MLP projections) are replicated over TP unless sequence parallelism shards them.
Full recompute keeps only each layer's input plus one layer's working set; selective recompute
drops the attention core's outputs. The first pipeline stage holds min(pp, m) microbatches
(1F1B) or pp*(1 + (pp-1)/(pp*v)) (interleaved, Korthikanti §4.2.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from flopwise.units import GIB

from .constants import (
    ACT_BYTES,
    ALLOCATOR_FRAGMENTATION,
    FRAMEWORK_FIXED_BYTES,
    LOGITS_BYTES_PER_ELEMENT,
    UNFUSED_SCORE_BYTES_STORED,
    ZERO3_GATHERED_LAYERS,
)
from .context import ModelContext
from .layout import Layout


@dataclass(frozen=True, slots=True)
class StateBytes:
    """Training-state bytes on one GPU of the first and the last pipeline stage."""

    first: tuple[float, float, float, float, float]  # weights, grads, master, optimizer, zero3
    last: tuple[float, float, float, float, float]

    def total(self, which: str) -> float:
        return sum(self.first if which == "first" else self.last)


def _stage_params(ctx: ModelContext, tp: int, pp: int, ep: int) -> tuple[float, float, float]:
    """(non-expert params on the first stage, on the last stage, expert params per stage)."""
    m, c = ctx.model, ctx.counts
    layers_first = -(-m.layers // pp)
    layers_last = m.layers // pp if pp > 1 else m.layers
    frac_moe = ctx.n_moe / m.layers
    per_layer_shared = (1 - frac_moe) * ctx.dense_layer_params + frac_moe * ctx.moe_shared_params
    per_layer_expert = frac_moe * ctx.moe_expert_params / ep
    vocab_rows = c.output_projection  # vocab x hidden
    emb = c.embedding
    head = c.lm_head if c.lm_head else (vocab_rows if pp > 1 else 0)  # tied: copy on last stage
    if pp == 1:
        first = layers_first * per_layer_shared + emb + head
        return first / tp, first / tp, layers_first * per_layer_expert / tp
    first = layers_first * per_layer_shared + emb
    last = layers_last * per_layer_shared + head
    return first / tp, last / tp, layers_first * per_layer_expert / tp


def state_bytes(ctx: ModelContext, lay: Layout) -> StateBytes:
    key = (lay.tp, lay.pp, lay.dp, lay.cp, lay.ep, lay.zero, lay.hsdp)
    cache = ctx.cache("state")
    hit = cache.get(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    r = ctx.recipe
    p_first, p_last, p_exp = _stage_params(ctx, lay.tp, lay.pp, lay.ep)
    n = ctx.shard_group(lay.tp, lay.dp, lay.cp, lay.hsdp)
    n_exp = max(min(n, lay.dp * lay.cp // lay.ep), 1)
    z = lay.zero

    def split(p: float, shard: int) -> tuple[float, float, float, float]:
        return (
            r.weights * p / (shard if z >= 3 else 1),
            r.grads * p / (shard if z >= 2 else 1),
            r.master * p / (shard if z >= 1 else 1),
            r.optimizer * p / (shard if z >= 1 else 1),
        )

    layer_p = (p_first + p_exp) / max(-(-ctx.layers // lay.pp), 1)
    # gathered 16-bit weights and their 16-bit gradients before the reduce-scatter
    gathered = ZERO3_GATHERED_LAYERS * layer_p * 2 * ACT_BYTES if z >= 3 else 0.0
    out = []
    for p in (p_first, p_last):
        a = split(p, n)
        b = split(p_exp, n_exp)
        out.append((a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], gathered))
    res = StateBytes(first=tuple(out[0]), last=tuple(out[1]))  # type: ignore[arg-type]
    cache[key] = res
    return res


def layer_activation_bytes(
    ctx: ModelContext, tp: int, cp: int, mb: int, sp: bool
) -> tuple[float, float, float]:
    """(bytes kept per layer per microbatch without recompute, dropped by selective recompute,
    the layer input kept by full recompute)."""
    m = ctx.model
    tokens = mb * ctx.job.seq_len / cp
    h = m.hidden
    kv_local = max(m.kv_heads / tp, 1.0)
    hidden_part = 4.0 * h / (tp if sp else 1)
    q = m.heads / tp * m.head_dim
    k = kv_local * m.head_dim
    v = kv_local * m.v_head_dim
    o = m.heads / tp * m.v_head_dim
    lse = 2.0 * m.heads / tp  # fp32 log-sum-exp per head, in 16-bit element units
    if m.is_mla:
        k = m.heads / tp * m.head_dim
        v = m.heads / tp * m.v_head_dim
        hidden_part += (m.kv_lora_rank + m.q_lora_rank) / (tp if sp else 1)
    attn = q + k + v + o + lse
    mlp_mult = 3.0 if m.gated_mlp else 2.0
    frac_moe = ctx.n_moe / m.layers
    dense_mlp = mlp_mult * m.ffn / tp
    moe_mlp = 0.0
    if m.is_moe:
        moe_mlp = (
            m.experts_per_token * (h + mlp_mult * m.expert_ffn / tp)
            + m.shared_experts * mlp_mult * m.shared_expert_ffn / tp
        )
    mlp = (1 - frac_moe) * dense_mlp + frac_moe * moe_mlp
    per_token = hidden_part + attn + mlp
    full_input = h / (tp if sp else 1)
    scores = 0.0
    if ctx.job.attention_kernel == "unfused":
        # Korthikanti's 5as^2b: softmax output, dropout mask and dropout output per score
        scores = UNFUSED_SCORE_BYTES_STORED * mb * m.heads / tp * (ctx.job.seq_len / cp) ** 2
    return (
        per_token * tokens * ACT_BYTES + scores,
        (o + lse) * tokens * ACT_BYTES + scores,
        full_input * tokens * ACT_BYTES,
    )


def in_flight(lay: Layout, microbatches: int) -> float:
    """Microbatches whose activations the first stage holds at its peak."""
    if lay.pp == 1:
        return 1.0
    if lay.vpp == 1:
        return float(min(lay.pp, microbatches))
    return lay.pp * (1.0 + (lay.pp - 1) / (lay.pp * lay.vpp))


@dataclass(frozen=True, slots=True)
class MemoryBreakdown:
    """Bytes per GPU on the pipeline stage that needs the most."""

    stage: str  # "first" | "last" | "only"
    weights: float
    grads: float
    master: float
    optimizer: float
    zero3_gathered: float
    activations: float
    logits: float
    fragmentation: float
    framework: float
    capacity: float | None

    @property
    def total(self) -> float:
        return (
            self.weights
            + self.grads
            + self.master
            + self.optimizer
            + self.zero3_gathered
            + self.activations
            + self.logits
            + self.fragmentation
            + self.framework
        )

    @property
    def fits(self) -> bool | None:
        return None if self.capacity is None else self.total <= self.capacity

    def to_dict(self) -> dict[str, Any]:
        g = GIB
        return {
            "stage": self.stage,
            "weights_gib": self.weights / g,
            "grads_gib": self.grads / g,
            "master_weights_gib": self.master / g,
            "optimizer_gib": self.optimizer / g,
            "zero3_gathered_gib": self.zero3_gathered / g,
            "activations_gib": self.activations / g,
            "logits_gib": self.logits / g,
            "allocator_fragmentation_gib": self.fragmentation / g,
            "framework_overhead_gib": self.framework / g,
            "total_gib": self.total / g,
            "usable_gib": None if self.capacity is None else self.capacity / g,
        }


def activation_bytes(
    ctx: ModelContext, lay: Layout, microbatches: int
) -> tuple[float, float, float]:
    """(activations on the first stage, on the last stage, the logits buffer), bytes."""
    key = (lay.tp, lay.cp, lay.microbatch, lay.sequence_parallel)
    cache = ctx.cache("act")
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = layer_activation_bytes(
            ctx, lay.tp, lay.cp, lay.microbatch, lay.sequence_parallel
        )
    full, selective_saves, layer_input = cast("tuple[float, float, float]", hit)
    if lay.recompute == "full":
        kept, working = layer_input, full
    elif lay.recompute == "selective":
        kept, working = full - selective_saves, 0.0
    else:
        kept, working = full, 0.0
    layers_first = -(-ctx.layers // lay.pp)
    layers_last = ctx.layers // lay.pp if lay.pp > 1 else ctx.layers
    first = layers_first * in_flight(lay, microbatches) * kept + working
    last = layers_last * kept + working  # the last stage runs each microbatch's backward at once
    tokens = lay.microbatch * ctx.job.seq_len / lay.cp
    logits = tokens * ctx.model.vocab / lay.tp * LOGITS_BYTES_PER_ELEMENT
    return first, last, logits


def memory_breakdown(ctx: ModelContext, lay: Layout, microbatches: int) -> MemoryBreakdown:
    """Peak memory per GPU with its parts, on the stage that needs the most."""
    st = state_bytes(ctx, lay)
    first_acts, last_acts, logits = activation_bytes(ctx, lay, microbatches)
    cap, frag, fixed = ctx.capacity_bytes, ALLOCATOR_FRAGMENTATION, FRAMEWORK_FIXED_BYTES
    if lay.pp == 1:
        w, g, ms, o, z3 = st.first
        return MemoryBreakdown(
            "only", w, g, ms, o, z3, first_acts, logits, frag * (first_acts + logits), fixed, cap
        )
    first_total = st.total("first") + first_acts * (1 + frag)
    last_total = st.total("last") + (last_acts + logits) * (1 + frag)
    if first_total >= last_total:
        w, g, ms, o, z3 = st.first
        return MemoryBreakdown(
            "first", w, g, ms, o, z3, first_acts, 0.0, frag * first_acts, fixed, cap
        )
    w, g, ms, o, z3 = st.last
    return MemoryBreakdown(
        "last", w, g, ms, o, z3, last_acts, logits, frag * (last_acts + logits), fixed, cap
    )


def total_memory_bytes(ctx: ModelContext, lay: Layout, microbatches: int) -> float:
    """Peak bytes per GPU (the fast path the search uses; equals memory_breakdown().total)."""
    return memory_breakdown(ctx, lay, microbatches).total
