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
drops the attention core's outputs.

Pipelines: the peak is the largest over pipeline ranks, not the first stage's alone. Rank r of a
1F1B schedule holds min(pp - r, m) microbatches at its peak (Megatron-Core schedules.py
forward_backward_pipelining_without_interleaving: pp - r - 1 warm-up forwards, then one more
before its first backward); with v virtual stages it holds min(2(pp - r - 1) + (v - 1) pp + 1,
m v) model chunks of L_r / v layers (forward_backward_pipelining_with_interleaving; for rank 0
this is Korthikanti §4.2.3's pp (1 + (pp - 1)/(pp v)), and with m = pp every forward runs
before the first backward). When pp does not divide the layers, the lighter stages go to the
ends, first and last first (Llama 3, arXiv:2407.21783 §3.3.2: one layer fewer on the first and
the last stage; Megatron-Core decoder_first/last_pipeline_num_layers), so the middle ranks may
peak: a rank with one layer more and one microbatch fewer in flight.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from flopwise.units import GIB
from flopwise.workload.memory_bytes import TrainingRecipe

from .activations import (
    TE_FP8_RECIPES,
    host_offload_bytes,
    layer_activation_bytes,
    layer_acts,
    logits_bytes,
    op_checkpoint_bytes,
)
from .constants import (
    ACT_BYTES,
    ALLOCATOR_FRAGMENTATION,
    FRAMEWORK_FIXED_BYTES,
    ZERO3_GATHERED_LAYERS,
)
from .context import ModelContext
from .layout import Layout
from .lora import NF4_BYTES_PER_PARAM
from .xla_memory import XLA_FSDP_GATHERED_LAYERS, is_xla

__all__ = [
    "TE_FP8_RECIPES",
    "MemoryBreakdown",
    "StateBytes",
    "in_flight_layers",
    "layer_activation_bytes",
    "logits_bytes",
    "memory_breakdown",
    "op_checkpoint_bytes",
    "stage_layers",
    "state_bytes",
    "total_memory_bytes",
    "weight_bytes_per_param",
]


@dataclass(frozen=True, slots=True)
class StateBytes:
    """Training-state bytes on one GPU of the first and the last pipeline stage."""

    first: tuple[float, float, float, float, float]  # weights, grads, master, optimizer, zero3
    last: tuple[float, float, float, float, float]

    def total(self, which: str) -> float:
        return sum(self.first if which == "first" else self.last)


def mtp_module_params(ctx: ModelContext) -> tuple[float, float]:
    """(non-expert, routed-expert) parameters of one multi-token-prediction module: a layer of
    the kind the model ends with (Megatron-Core builds it from the decoder's last layer spec:
    an MoE layer in DeepSeek-V3) and its h x 2h projection (DeepSeek-V3 §2.2). Its embedding
    and output head are the model's, shared (a copy of the embedding where it sits off the
    embedding's rank). DeepSeek-V3: 11.6B + 0.1B, with the two 0.93B vocabulary matrices 13.5B,
    against the 14B of MTP weights its checkpoint holds."""
    m = ctx.model
    proj = 2.0 * m.hidden * m.hidden
    if ctx.n_moe:
        return ctx.moe_shared_params + proj, ctx.moe_expert_params
    return ctx.dense_layer_params + proj, 0.0


def _rank_params(
    ctx: ModelContext, pp: int, ep: int, layers_r: int, first: bool, last: bool, mtp: int = 0
) -> tuple[float, float]:
    """(non-expert parameters, routed-expert parameters / ep) a pipeline rank holds, before any
    TP split: its `layers_r` layers; the embedding where it is `first`, or where it runs `mtp`
    multi-token-prediction modules, which look the shifted tokens up in a copy; the output head
    where it is `last` (a tied head copied there when pp > 1); and those modules."""
    m, c = ctx.model, ctx.counts
    frac_moe = ctx.n_moe / m.layers
    per_layer = (1 - frac_moe) * ctx.dense_layer_params + frac_moe * ctx.moe_shared_params
    mtp_shared, mtp_experts = mtp_module_params(ctx)
    p = layers_r * per_layer + mtp * mtp_shared
    if first or mtp:
        p += c.embedding
    if last:
        p += c.lm_head if c.lm_head else (c.output_projection if pp > 1 else 0)
    p_exp = (layers_r * frac_moe * ctx.moe_expert_params + mtp * mtp_experts) / ep
    return p, p_exp


def _stage_params(
    ctx: ModelContext, tp: int, pp: int, ep: int, etp: int | None = None
) -> tuple[float, float, float]:
    """(non-expert params on the first stage, on the last stage, expert params per stage);
    experts split over `etp` ranks (default: the TP degree). With an explicit pipeline layout
    the "first" stage is the rank holding the most parameters, the last the loss rank's."""
    etp = etp or tp
    layers = ctx.model.layers
    n_mtp, mtp_rank = ctx.job.mtp_layers, ctx.mtp_rank(pp)
    pl = ctx.pipeline(pp)
    if pl is not None:
        ranks = [
            _rank_params(
                ctx,
                pp,
                ep,
                n,
                r == pl.embedding_rank,
                r == pl.loss_rank,
                n_mtp if r == mtp_rank else 0,
            )
            for r, n in enumerate(pl.rank_layers)
        ]
        first, last = max(p for p, _ in ranks), ranks[pl.loss_rank][0]
    elif pp == 1:
        ranks = [_rank_params(ctx, pp, ep, layers, True, True, n_mtp)]
        first = last = ranks[0][0]
    else:
        l_first, l_last = _stage_layer_counts(ctx, pp)
        ranks = [
            _rank_params(ctx, pp, ep, l_first, True, False),
            _rank_params(ctx, pp, ep, l_last, False, True, n_mtp),
        ]
        first, last = ranks[0][0], ranks[1][0]
    return first / tp, last / tp, max(e for _, e in ranks) / etp


def trainable_stage_params(
    ctx: ModelContext, tp: int, pp: int, ep: int, etp: int | None = None
) -> tuple[float, float, float]:
    """As _stage_params, the parameters that are trained (carry gradients and optimizer state):
    every one, or under LoRA only the adapters of each stage's layers (plan/train/lora.py)."""
    if not ctx.frozen:
        return _stage_params(ctx, tp, pp, ep, etp)
    first, last = _stage_layer_counts(ctx, pp)
    a = ctx.adapter_params_per_layer / tp
    a_exp = ctx.expert_adapter_params_per_layer / ep / (etp or tp)
    return first * a, last * a, first * a_exp


def _stage_layer_counts(ctx: ModelContext, pp: int) -> tuple[int, int]:
    """(layers of the "first" stage, of the last stage): the even split's first and last ranks,
    or an explicit layout's fullest rank and its loss rank."""
    layers = ctx.model.layers
    pl = ctx.pipeline(pp)
    if pl is not None:
        return max(pl.rank_layers), pl.rank_layers[pl.loss_rank]
    if pp == 1:
        return layers, layers
    return -(-layers // pp), layers // pp


def expert_shard_group(lay: Layout, shard: int) -> int:
    """Ranks ZeRO shards the expert states over: the expert data-parallel group, inside the
    dense states' shard group scaled by the TP ranks the experts are folded across."""
    return max(min(shard * (lay.tp // lay.expert_tp), lay.expert_dp), 1)


def state_bytes(ctx: ModelContext, lay: Layout) -> StateBytes:
    key = (lay.tp, lay.pp, lay.dp, lay.cp, lay.ep, lay.zero, lay.hsdp, lay.etp)
    cache = ctx.cache("state")
    hit = cache.get(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    r = ctx.recipe
    p_first, p_last, p_exp = _stage_params(ctx, lay.tp, lay.pp, lay.ep, lay.expert_tp)
    n = ctx.shard_group(lay.tp, lay.dp, lay.cp, lay.hsdp)
    n_exp = expert_shard_group(lay, n)
    z = lay.zero

    stage_max = _stage_layer_counts(ctx, lay.pp)[0]
    layer_p = (p_first + p_exp) / max(stage_max, 1)
    gathered = _gathered_layers(ctx)
    if ctx.frozen:
        a_first, a_last, a_exp = trainable_stage_params(ctx, lay.tp, lay.pp, lay.ep, lay.expert_tp)
        l_first, l_last = _stage_layer_counts(ctx, lay.pp)
        q = ctx.nf4_params_per_layer / lay.tp
        out = [
            _lora_state(r, z, p, p_exp, n, n_exp, layer_p, gathered, a, layers * q, a_exp)
            for p, a, layers in ((p_first, a_first, l_first), (p_last, a_last, l_last))
        ]
    else:
        out = [_state(r, z, p, p_exp, n, n_exp, layer_p, gathered) for p in (p_first, p_last)]
    res = StateBytes(first=out[0], last=out[1])
    cache[key] = res
    return res


def weight_bytes_per_param(recipe: TrainingRecipe, zero: int) -> float:
    """Bytes per parameter of the weights a GPU holds through the step (before sharding).

    FSDP recipes keep their fp32 sharded parameters as the master copy (weights 0 B) and
    gather a 16-bit compute copy per layer under ZeRO-3 (FULL_SHARD, charged as gathered
    layers). Under ZeRO-0/1/2 (NO_SHARD, SHARD_GRAD_OP, or FSDP2 reshard_after_forward=False
    as torchtitan sets it with pipeline parallelism) that 16-bit copy stays unsharded from the
    forward to the backward: 2 bytes per parameter on every GPU."""
    if recipe.weights == 0 and zero < 3:
        return ACT_BYTES
    return recipe.weights


def _state(
    r: TrainingRecipe,
    z: int,
    p: float,
    p_exp: float,
    n: int,
    n_exp: int,
    layer_p: float,
    gathered_layers: int = ZERO3_GATHERED_LAYERS,
) -> tuple[float, float, float, float, float]:
    """(weights, grads, master, optimizer, transient) bytes for p shared + p_exp expert params;
    `gathered_layers`: layers whose weights ZeRO-3 holds gathered at once (PyTorch FSDP: the
    computing and the prefetched one; XLA over scanned layers: one, xla_memory.py)."""
    w = weight_bytes_per_param(r, z)

    def split(q: float, shard: int) -> tuple[float, float, float, float]:
        return (
            w * q / (shard if z >= 3 else 1),
            r.grads * q / (shard if z >= 2 else 1),
            r.master * q / (shard if z >= 1 else 1),
            r.optimizer * q / (shard if z >= 1 else 1),
        )

    # ZeRO-3: gathered 16-bit weights and their 16-bit gradients before the reduce-scatter;
    # ZeRO-2: the unsharded 16-bit gradients of the layers whose reduce-scatter is in flight
    if z >= 3:
        transient = gathered_layers * layer_p * 2 * ACT_BYTES
    elif z == 2:
        transient = gathered_layers * layer_p * ACT_BYTES
    else:
        transient = 0.0
    a = split(p, n)
    b = split(p_exp, n_exp)
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], transient)


def _lora_state(
    r: TrainingRecipe,
    z: int,
    p: float,
    p_exp: float,
    n: int,
    n_exp: int,
    layer_p: float,
    gathered_layers: int,
    adapters: float,
    nf4: float = 0.0,
    adapters_exp: float = 0.0,
) -> tuple[float, float, float, float, float]:
    """(weights, grads, master, optimizer, transient) bytes under LoRA (plan/train/lora.py):
    the frozen base weights at their stored bytes (16-bit where the recipe keeps fp32 sharded
    parameters as its master; QLoRA's `nf4` of them at NF4_BYTES_PER_PARAM), sharded under
    ZeRO-3, with no gradient, master or optimizer state; the `adapters` with the recipe's whole
    state; ZeRO-3's gathered layers hold their stored weights and no gradients."""
    wf = r.weights if r.weights > 0 else ACT_BYTES
    shard = n if z >= 3 else 1
    base = wf * (p - nf4) / shard + NF4_BYTES_PER_PARAM * nf4 / shard
    base += wf * p_exp / (n_exp if z >= 3 else 1)
    aw, ag, am, ao, _ = _state(r, z, adapters, adapters_exp, n, n_exp, 0.0, gathered_layers)
    per_param = NF4_BYTES_PER_PARAM if nf4 else ACT_BYTES
    transient = gathered_layers * layer_p * per_param if z >= 3 else 0.0
    return (base + aw, ag, am, ao, transient)


@lru_cache(maxsize=4096)
def stage_layers(layers: int, pp: int) -> tuple[int, ...]:
    """Transformer layers on each pipeline rank. When pp does not divide them, the stages with
    one layer fewer go to the ends first (rank 0, rank pp-1, rank 1, ...): Llama 3 §3.3.2 and
    Megatron-Core decoder_first/last_pipeline_num_layers lighten the embedding and loss stages.
    """
    if pp == 1:
        return (layers,)
    base, extra = divmod(layers, pp)
    counts = [base + 1] * pp
    order: list[int] = []
    lo, hi = 0, pp - 1
    while lo <= hi:
        order.append(lo)
        if hi != lo:
            order.append(hi)
        lo, hi = lo + 1, hi - 1
    for rank in order[: pp - extra]:
        counts[rank] = base
    return tuple(counts)


@lru_cache(maxsize=4096)
def _candidate_ranks(layers: int, pp: int) -> tuple[int, ...]:
    """The ranks that can hold the peak: the first and the last (embedding, head, logits) and,
    among the middle ranks, the lowest of each layer count (in-flight activations only fall
    with the rank, and a middle rank's state depends only on its layer count)."""
    counts = stage_layers(layers, pp)
    out = {0, pp - 1}
    for n in set(counts[1:-1]):
        out.add(next(r for r in range(1, pp - 1) if counts[r] == n))
    return tuple(sorted(out))


def in_flight_layers(lay: Layout, rank: int, layers_r: int, microbatches: int) -> float:
    """Layer-microbatches of activations pipeline rank `rank` holds at its peak (1F1B:
    min(pp - rank, m) microbatches; interleaved: Megatron-Core's warm-up count + 1 chunks of
    layers_r / v layers, at most every chunk of every microbatch)."""
    if lay.pp == 1:
        return float(layers_r)
    if lay.vpp == 1:
        return float(min(lay.pp - rank, microbatches) * layers_r)
    chunks = min(2 * (lay.pp - rank - 1) + (lay.vpp - 1) * lay.pp + 1, microbatches * lay.vpp)
    return chunks * layers_r / lay.vpp


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
    # XLA: bytes the loss phase and a layer's backward reuse (xla_memory.py), off the sum
    phase_reuse: float = 0.0
    # bytes a remat policy keeps in pinned host memory (not device memory, not in the total)
    host_offload: float = 0.0

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
            - self.phase_reuse
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
            "phase_reuse_gib": self.phase_reuse / g,
            "host_offload_gib": self.host_offload / g,
            "total_gib": self.total / g,
            "usable_gib": None if self.capacity is None else self.capacity / g,
        }


def _rank_state(
    ctx: ModelContext, lay: Layout, layers_r: int, first: bool, last: bool, mtp: int = 0
) -> tuple[float, float, float, float, float]:
    """State bytes of a rank of `layers_r` layers (`mtp`: multi-token-prediction modules it
    holds besides, each a layer, an h x 2h projection and, off the first rank, the embedding)."""
    key = (
        lay.tp,
        lay.pp,
        lay.dp,
        lay.cp,
        lay.ep,
        lay.zero,
        lay.hsdp,
        lay.etp,
        layers_r,
        first,
        last,
        mtp,
    )
    cache = ctx.cache("rank_state")
    hit = cache.get(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    frac_moe = ctx.n_moe / ctx.model.layers
    per_layer = (1 - frac_moe) * ctx.dense_layer_params + frac_moe * ctx.moe_shared_params
    p, p_exp = _rank_params(ctx, lay.pp, lay.ep, layers_r, first, last, mtp)
    p_exp /= lay.expert_tp
    p /= lay.tp
    n = ctx.shard_group(lay.tp, lay.dp, lay.cp, lay.hsdp)
    n_exp = expert_shard_group(lay, n)
    layer_p = per_layer / lay.tp + frac_moe * ctx.moe_expert_params / lay.ep / lay.expert_tp
    gathered = _gathered_layers(ctx)
    if ctx.frozen:
        adapters = layers_r * ctx.adapter_params_per_layer / lay.tp
        a_exp = layers_r * ctx.expert_adapter_params_per_layer / lay.ep / lay.expert_tp
        nf4 = layers_r * ctx.nf4_params_per_layer / lay.tp
        res = _lora_state(
            ctx.recipe, lay.zero, p, p_exp, n, n_exp, layer_p, gathered, adapters, nf4, a_exp
        )
    else:
        res = _state(ctx.recipe, lay.zero, p, p_exp, n, n_exp, layer_p, gathered)
    cache[key] = res
    return res


def memory_breakdown(ctx: ModelContext, lay: Layout, microbatches: int) -> MemoryBreakdown:
    """Peak memory per GPU with its parts, on the pipeline rank that needs the most."""
    kept, working = layer_acts(ctx, lay)
    logits = logits_bytes(ctx, lay)
    cap, frag, fixed = ctx.capacity_bytes, ALLOCATOR_FRAGMENTATION, FRAMEWORK_FIXED_BYTES
    if is_xla(ctx):
        # XLA on TPU assigns buffers statically at compile time: no CUDA context, NCCL
        # buffers or caching allocator (JAX's bytes_limit is the HBM XLA may plan into)
        frag, fixed = 0.0, 0.0
    # each multi-token-prediction module keeps a layer's activations and its own logits
    n_mtp, mtp_rank = ctx.job.mtp_layers, ctx.mtp_rank(lay.pp)
    if lay.pp == 1:
        logits *= 1 + n_mtp
        w, g, ms, o, z3 = _rank_state(ctx, lay, ctx.layers, True, True, n_mtp)
        acts = (ctx.layers + n_mtp) * kept + working
        host = ctx.layers * host_offload_bytes(ctx, lay)
        if is_xla(ctx):
            # two peaks, not their sum: the loss (logits and the output head's gathered weight
            # and gradient) and one layer's backward (its working set and gathered weights)
            loss = logits + _head_gathered_bytes(ctx, lay)
            reuse = min(loss, working + z3)
            return MemoryBreakdown("only", w, g, ms, o, z3, acts, loss, 0.0, 0.0, cap, reuse, host)
        return MemoryBreakdown(
            "only", w, g, ms, o, z3, acts, logits, frag * (acts + logits), fixed, cap, 0.0, host
        )
    pl = ctx.pipeline(lay.pp)
    if pl is not None:
        # an explicit layout: every rank's own layers; embedding and loss where it puts them
        layers, ranks = pl.rank_layers, tuple(range(lay.pp))
        emb_rank, loss_rank = pl.embedding_rank, pl.loss_rank
    else:
        layers, ranks = stage_layers(ctx.layers, lay.pp), _candidate_ranks(ctx.layers, lay.pp)
        emb_rank, loss_rank = 0, lay.pp - 1

    def extras(rank: int) -> tuple[int, float]:
        """(MTP modules, logits bytes) a rank holds beside its layers."""
        m_r = n_mtp if rank == mtp_rank else 0
        return m_r, (logits if rank == loss_rank else 0.0) + m_r * logits

    best_total, best_rank, best_acts = -1.0, 0, 0.0
    for rank in ranks:
        m_r, lg = extras(rank)
        layers_r = layers[rank]
        last = rank == loss_rank
        acts = in_flight_layers(lay, rank, layers_r + m_r, microbatches) * kept + working
        state = _rank_state(ctx, lay, layers_r, rank == emb_rank, last, m_r)
        total = sum(state) + (acts + lg) * (1 + frag)
        if total > best_total:
            best_total, best_rank, best_acts = total, rank, acts
    first, last = best_rank == emb_rank, best_rank == loss_rank
    m_best, lg = extras(best_rank)
    w, g, ms, o, z3 = _rank_state(ctx, lay, layers[best_rank], first, last, m_best)
    stage = "first" if first else "last" if last else f"rank {best_rank}"
    in_flight = in_flight_layers(lay, best_rank, layers[best_rank] + m_best, microbatches)
    host = in_flight * host_offload_bytes(ctx, lay)
    return MemoryBreakdown(
        stage, w, g, ms, o, z3, best_acts, lg, frag * (best_acts + lg), fixed, cap, 0.0, host
    )


def _gathered_layers(ctx: ModelContext) -> int:
    """Layers whose weights ZeRO-3 holds gathered at once: PyTorch FSDP's computing and
    prefetched ones, XLA's one over scanned layers (xla_memory.py)."""
    return XLA_FSDP_GATHERED_LAYERS if is_xla(ctx) else ZERO3_GATHERED_LAYERS


def _head_gathered_bytes(ctx: ModelContext, lay: Layout) -> float:
    """The output projection's gathered 16-bit weight and its 16-bit gradient during the loss
    under ZeRO-3 (FSDP all-gathers it like a layer's weights), split over TP."""
    if lay.zero < 3:
        return 0.0
    c = ctx.counts
    head = c.lm_head if c.lm_head else c.output_projection
    return 2 * ACT_BYTES * head / lay.tp


def total_memory_bytes(ctx: ModelContext, lay: Layout, microbatches: int) -> float:
    """Peak bytes per GPU (the fast path the search uses; equals memory_breakdown().total)."""
    return memory_breakdown(ctx, lay, microbatches).total
