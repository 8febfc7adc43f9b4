"""Step time for one layout, with a breakdown.

Per layer and microbatch on one GPU: GEMMs (forward; backward = data-gradient + weight-gradient
GEMMs) at a shape-dependent rate (roofline.gemm_time_s: MAMF ceiling x tile/wave quantization,
memory roofline), the causal attention core at FlashAttention's achievable fraction of the 16-bit
peak, memory-bound elementwise work at achievable HBM bandwidth, and the collectives each
parallel dimension adds (alpha-beta per network tier, nccl-tests bus-bandwidth factors).
The bottleneck pipeline stage sets the pace: step = m x (stage time per microbatch) +
(pp-1)/v x the same (the 1F1B / interleaved bubble, Narayanan et al. 2021 §2.2) + the exposed
data-parallel traffic + the optimizer step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from flopwise.plan.attention_rate import chunk_attention_rates
from flopwise.plan.efficiency import (
    ATTENTION_BWD_FLOP_FACTOR,
)
from flopwise.plan.roofline import Tier, collective_time_s, gemm_time_s
from flopwise.units import GB
from flopwise.workload.remat import POLICIES
from flopwise.workload.spec import ModelSpec

from .constants import (
    ACT_BYTES,
    ADAM_EXTRA_WRITE_BYTES,
    CROSS_ENTROPY_TRAFFIC_BYTES,
    OVERLAP_COMPUTE_TAX,
    PP_EXPOSED_FRACTION,
    STEP_FIXED_S,
    TP_EXPOSED_FRACTION,
    UNFUSED_SCORE_BYTES_BWD,
    UNFUSED_SCORE_BYTES_FWD,
    zero_grad_handling_bytes,
)
from .context import ModelContext
from .dp_comm import dp_exposed_s, tied_embedding_s
from .fp8 import layer_cast_cost
from .fp8_recipes import FP8_BYTES
from .layout import Layout, stage_layers
from .lora import NF4_DEQUANT_BYTES_PER_PARAM, adapter_groups
from .memory import expert_shard_group, trainable_stage_params
from .muon import layer_matrices, newton_schulz_s, tp_gather_s
from .pipeline_layout import PipelineLayout
from .pointwise import layer_pointwise_bytes
from .recipes import grad_reduce_bytes
from .xla_memory import policy_recompute_s, policy_recomputes_attention


@dataclass(frozen=True, slots=True)
class LayerCost:
    """One average transformer layer, one microbatch, one GPU: seconds per part."""

    compute_fwd: float  # GEMMs + attention + elementwise, forward
    compute_bwd: float
    attn_fwd: float  # attention core alone (what selective recompute re-runs)
    attn_bwd: float
    tp_fwd: float
    tp_bwd: float
    cp_fwd: float  # exposed
    cp_bwd: float
    ep_fwd: float
    ep_bwd: float
    pointwise_fwd: float = 0.0  # memory-bound pointwise ops alone, forward (inside compute_fwd)
    # the sequence-parallel all-gathers of the layer's linear inputs, forward, exposed part
    # (inside tp_fwd): what op-level checkpointing gathers again in the backward
    tp_gather_fwd: float = 0.0
    # the forward work after the layer's last tensor saved for the backward: the dense MLP's
    # output projection and its tensor-parallel reduction (inside compute_fwd and tp_fwd),
    # which a recompute that re-runs only what the backward reads leaves out
    # (frameworks.RECOMPUTE_REPLAY_MODES)
    tail_fwd: float = 0.0


def _gemm(
    ctx: ModelContext,
    m: float,
    n: float,
    k: float,
    batch: int = 1,
    dtype: str | None = None,
    grouped: bool = False,
    wgrad: bool | None = None,
) -> tuple[float, float]:
    """(forward, backward) seconds of `batch` GEMMs (m x k) @ (k x n); `grouped`: one grouped
    kernel per pass (MoE experts, at GROUPED_GEMM_EFFICIENCY of the dense FLOP roof); `wgrad`:
    whether the backward computes the weight's gradient (default: unless the job's base weights
    are frozen, LoRA: only the data gradient then)."""
    dt = dtype or ctx.job.dtype
    if wgrad is None:
        wgrad = not ctx.frozen
    key = (m, n, k, batch, dt, grouped, wgrad)
    cache = ctx.cache("gemm")
    hit = cache.get(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    mi, ni, ki = max(int(m), 1), max(int(n), 1), max(int(k), 1)
    # a low-precision recipe's GEMMs run in its own dtype (NVFP4: the FP4 tensor cores)
    gdt = ctx.fp8_recipe.gemm_dtype if dt == "fp8" else dt
    fwd = gemm_time_s(mi, ni, ki, ctx.hw, gdt, batch, grouped=grouped)
    dgrad = gemm_time_s(mi, ki, ni, ctx.hw, gdt, batch, grouped=grouped)
    wgrad_dt = dt
    if dt == "fp8":
        # the FP8 recipe's GEMM kernels (row-wise scaled, or a 16-bit weight gradient)
        r = ctx.fp8_recipe
        fwd /= r.fwd_gemm_fraction
        dgrad /= r.dgrad_gemm_fraction
        wgrad_dt = r.wgrad_dtype
    bwd = dgrad
    if wgrad:
        bwd += gemm_time_s(ki, ni, mi, ctx.hw, wgrad_dt, batch, grouped=grouped)
    cache[key] = (fwd, bwd)
    return fwd, bwd


def layer_cost(
    ctx: ModelContext, tp: int, cp: int, mb: int, sp: bool, ep: int, etp: int | None = None
) -> LayerCost:
    etp = etp or tp
    key = (tp, cp, mb, sp, ep, etp)
    cache = ctx.cache("layer")
    hit = cache.get(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    m = ctx.model
    t = mb * ctx.job.seq_len / cp  # tokens this GPU processes per microbatch
    h = m.hidden
    kv_local = max(m.kv_heads / tp, 1.0)
    # attention projections
    if m.is_mla:
        from flopwise.workload.params import attention_params

        cols = attention_params(m) / h - m.heads * m.v_head_dim
        qkv = _gemm(ctx, t, cols / tp, h)
    elif ctx.job.profile.separate_projections:
        # three GEMMs sharing one input (torchtitan's Llama: wq, wk, wv nn.Linear)
        parts = (
            _gemm(ctx, t, m.heads * m.head_dim / tp, h),
            _gemm(ctx, t, kv_local * m.head_dim, h),
            _gemm(ctx, t, kv_local * m.v_head_dim, h),
        )
        qkv = (sum(p[0] for p in parts), sum(p[1] for p in parts))
    else:
        qkv = _gemm(ctx, t, (m.heads * m.head_dim) / tp + kv_local * (m.head_dim + m.v_head_dim), h)
    out = _gemm(ctx, t, h, m.heads * m.v_head_dim / tp)
    mult = 2 if m.gated_mlp else 1
    dense_mlp: list[tuple[float, float]] = []
    # (an MoE model whose every layer is MoE runs no dense MLP: its `ffn` is not priced)
    if m.ffn and ctx.n_moe < m.layers:
        if ctx.job.profile.separate_projections:
            # gate and up projections as two GEMMs (torchtitan's FeedForward: w1, w3)
            up = _gemm(ctx, t, m.ffn / tp, h)
            dense_up = (mult * up[0], mult * up[1])
        else:
            dense_up = _gemm(ctx, t, mult * m.ffn / tp, h)
        dense_mlp = [dense_up, _gemm(ctx, t, h, m.ffn / tp)]
    moe_mlp: list[tuple[float, float]] = []
    moe_rows = 0.0
    if m.is_moe:
        local = m.experts // ep
        # tokens per local expert, balanced (the published MoE training tables force-balance
        # tokens among experts; serving draws each expert's count, plan/infer/latency.py _mlp);
        # folded below TP, each of the tp / etp ranks that
        # shared a token's expert under TP dispatches its own sequence-parallel share instead
        rows = moe_rows = t * m.experts_per_token * ep / m.experts / (tp // etp)
        moe_mlp = [
            _gemm(ctx, t, m.experts, h),
            _gemm(ctx, rows, mult * m.expert_ffn / etp, h, local, grouped=True),
            _gemm(ctx, rows, h, m.expert_ffn / etp, local, grouped=True),
        ]
        if m.shared_experts:
            sf = m.shared_experts * m.shared_expert_ffn
            moe_mlp += [_gemm(ctx, t, mult * sf / tp, h), _gemm(ctx, t, h, sf / tp)]
    frac_moe = ctx.n_moe / m.layers
    g_fwd = qkv[0] + out[0]
    g_bwd = qkv[1] + out[1]
    g_fwd += (1 - frac_moe) * sum(x[0] for x in dense_mlp) + frac_moe * sum(x[0] for x in moe_mlp)
    g_bwd += (1 - frac_moe) * sum(x[1] for x in dense_mlp) + frac_moe * sum(x[1] for x in moe_mlp)
    adapters = None
    if ctx.frozen:
        # LoRA: each targeted linear's adapter, x A then (x A) B, trained (16-bit)
        adapters = adapter_cost(ctx, t, tp, ep, etp, moe_rows)
        g_fwd += adapters.fwd_s
        g_bwd += adapters.bwd_s
    sustain = ctx.gemm_fraction
    g_fwd /= sustain
    g_bwd /= sustain
    # the dense MLP's output projection (an MoE layer's last saved tensors, the combine's
    # routing indices and probabilities, come after its experts: nothing is left out there)
    tail = (1 - frac_moe) * dense_mlp[-1][0] / sustain if dense_mlp else 0.0
    a_fwd, a_bwd = _attention_core(ctx, t, tp, mb, cp)
    # memory-bound pointwise work: fused kernels, XLA fusions or eager ops (pointwise.py)
    pw_fwd, pw_bwd = layer_pointwise_bytes(ctx, tp, sp, frac_moe)
    e_fwd = pw_fwd * t / ctx.bw_bytes_s
    e_bwd = pw_bwd * t / ctx.bw_bytes_s
    pointwise_fwd = e_fwd
    if adapters is not None:
        # each adapter's output (and input gradient) merged with its linear's
        e_fwd += adapters.merge_fwd_bytes / ctx.bw_bytes_s
        e_bwd += adapters.merge_bwd_bytes / ctx.bw_bytes_s
    if ctx.nf4_params_per_layer:
        # QLoRA: every linear's NF4 weight dequantized to 16 bits before each GEMM that uses it
        deq = ctx.nf4_params_per_layer / tp * NF4_DEQUANT_BYTES_PER_PARAM / ctx.bw_bytes_s
        e_fwd += deq
        e_bwd += deq
    if ctx.job.dtype == "fp8":
        # the recipe's casts (and transposes, rescales) around every FP8 GEMM (plan/train/fp8.py)
        cast = layer_cast_cost(ctx, ctx.fp8_recipe, t, tp, sp, ep)
        e_fwd += cast.fwd_s
        e_bwd += cast.bwd_s
    # tensor parallel: 2 all-reduces (or all-gather + reduce-scatter pairs) each way per layer
    tp_f = gather_s = tail_tp = 0.0
    if tp > 1:
        tier = ctx.tier(tp, tp)
        size = t * h * ACT_BYTES
        exposed = TP_EXPOSED_FRACTION
        if ctx.job.tp_overlap():
            exposed = 1.0 / tp + OVERLAP_COMPUTE_TAX
        if sp:
            gather, gather_exposed = size, exposed
            if ctx.job.dtype == "fp8" and ctx.fp8_recipe.fp8_tp_all_gather:
                gather = t * h * FP8_BYTES  # activations and gradients gathered in FP8
            if ctx.job.dtype == "fp8" and not ctx.fp8_recipe.async_tp_fuses_all_gather:
                gather_exposed = TP_EXPOSED_FRACTION  # the all-gather-matmul is not fused
            gather_s = 2.0 * collective_time_s("all_gather", gather, tp, tier)
            gather_s *= min(gather_exposed, 1.0)
            scatter_s = 2.0 * collective_time_s("reduce_scatter", size, tp, tier)
            tp_f = gather_s + scatter_s * min(exposed, 1.0)
            tail_tp = scatter_s / 2.0 * min(exposed, 1.0)  # the MLP output's reduce-scatter
        else:
            tp_f = 2.0 * collective_time_s("all_reduce", size, tp, tier) * min(exposed, 1.0)
            tail_tp = tp_f / 2.0  # the MLP output's all-reduce
        tail_tp *= 1 - frac_moe
    # context parallel: ring exchange of K and V, hidden behind the attention core if it can be
    cp_f = cp_b = 0.0
    if cp > 1:
        tier = ctx.tier(cp, tp * cp)
        kv_bytes = t * kv_local * (m.head_dim + m.v_head_dim) * ACT_BYTES
        ring = (cp - 1) * collective_time_s("send_recv", kv_bytes, 2, tier)
        cp_f = max(0.0, ring - a_fwd)
        cp_b = max(0.0, 2.0 * ring - a_bwd)
    # expert parallel: dispatch and combine all-to-alls each way
    ep_f = 0.0
    if m.is_moe and ep > 1:
        # ranks stride tp x cp inside DP; folded below TP, the expert group is ep x etp
        # consecutive ranks (rank order tp-cp-dp)
        tier = ctx.tier(ep, tp * cp * ep if etp == tp else ep * etp)
        # tokens leave from the sequence-parallel shard (always, when folded below TP)
        size = t * m.experts_per_token * h * ACT_BYTES / (tp if sp or etp < tp else 1)
        if ctx.job.ep_dispatcher == "deepep" and 0 < tier.ranks_per_node < ep:
            one = node_deduplicated_dispatch_s(ctx, size, ep, tier)
        else:
            one = collective_time_s("all_to_all", size, ep, tier)
        ep_f = frac_moe * 2.0 * one
        if ctx.job.ep_overlap():
            # dispatch/combine of one microbatch run under another's compute (DualPipe,
            # Megatron-Core's overlap_moe_expert_parallel_comm: a layer's forward of one
            # microbatch beside its backward of another). That compute hides at most itself:
            # the pair's four all-to-alls beyond the pair's compute stay exposed, the hidden
            # part costs the SMs it takes (OVERLAP_COMPUTE_TAX)
            pair_comm = 2.0 * ep_f
            pair_compute = g_fwd + a_fwd + e_fwd + g_bwd + a_bwd + e_bwd
            exposed = max(0.0, pair_comm - pair_compute)
            ep_f = (exposed + OVERLAP_COMPUTE_TAX * (pair_comm - exposed)) / 2.0
    res = LayerCost(
        compute_fwd=g_fwd + a_fwd + e_fwd,
        compute_bwd=g_bwd + a_bwd + e_bwd,
        attn_fwd=a_fwd,
        attn_bwd=a_bwd,
        pointwise_fwd=pointwise_fwd,
        tp_gather_fwd=gather_s,
        tail_fwd=tail + tail_tp,
        tp_fwd=tp_f,
        tp_bwd=tp_f,
        cp_fwd=cp_f,
        cp_bwd=cp_b,
        ep_fwd=ep_f,
        ep_bwd=ep_f,
    )
    cache[key] = res
    return res


@dataclass(frozen=True, slots=True)
class AdapterCost:
    """One average layer's LoRA adapters, one microbatch, one GPU: the adapters' GEMMs (seconds
    at the GEMM model's rate, before the sustained fraction) and the bytes of the elementwise
    merges around them (each adapter's output added to its linear's, forward; the two input
    gradients added, backward)."""

    fwd_s: float = 0.0
    bwd_s: float = 0.0
    merge_fwd_bytes: float = 0.0
    merge_bwd_bytes: float = 0.0

    def plus(self, other: AdapterCost, weight: float = 1.0) -> AdapterCost:
        """This cost and `weight` times `other` (a part present in that share of the layers)."""
        return AdapterCost(
            self.fwd_s + weight * other.fwd_s,
            self.bwd_s + weight * other.bwd_s,
            self.merge_fwd_bytes + weight * other.merge_fwd_bytes,
            self.merge_bwd_bytes + weight * other.merge_bwd_bytes,
        )


def adapter_cost(
    ctx: ModelContext,
    t: float,
    tp: int,
    ep: int = 1,
    etp: int | None = None,
    rows: float = 0.0,
) -> AdapterCost:
    """One average layer's LoRA adapters for `t` tokens on one GPU (plan/train/lora.py): per
    targeted linear x A (in x r) and (x A) B (r x out), both trained, in 16-bit; TP splits B's
    output on column-parallel targets, A's input on row-parallel ones. In MoE layers each local
    expert's adapters run as grouped GEMMs over its `rows` tokens (split over `etp` as the
    expert is), the shared experts' as a dense MLP's. Each adapter's output is added to its
    linear's in a separate elementwise kernel (NeMo's `mixed_qkv + lora_mixed_qkv`, PEFT's
    `result + lora_B(lora_A(x)) * scaling`): read both, write the sum, and the same for the
    input gradients in the backward."""
    m, job = ctx.model, ctx.job
    r = job.lora_rank
    dt = "bf16" if job.dtype == "fp8" else None
    frac_moe = ctx.n_moe / m.layers
    # the share of the layers each group sits in (lora.ADAPTER_PLACES)
    share = {"all": 1.0, "dense": 1.0 - frac_moe, "shared": frac_moe, "expert": frac_moe}
    total = AdapterCost()
    for group in adapter_groups(m, job.lora_target_names, job.profile.separate_projections):
        if not share[group.where]:
            continue
        tokens, split, groups = t, tp, 1
        if group.where == "expert":
            tokens, split, groups = rows, etp or tp, m.experts // ep
        part = AdapterCost()
        for lin in group.linears:
            d_in = lin.d_in if lin.column_parallel else lin.d_in / split
            d_out = lin.d_out / split if lin.column_parallel else lin.d_out
            for n, k in ((r, d_in), (d_out, r)):
                f, b = _gemm(ctx, tokens, n, k, groups, dtype=dt, grouped=groups > 1, wgrad=True)
                part = part.plus(AdapterCost(f, b))
            # the merges: read both outputs (input gradients), write their sum
            fwd_bytes = 3.0 * tokens * groups * d_out * ACT_BYTES
            part = part.plus(
                AdapterCost(0.0, 0.0, fwd_bytes, 3.0 * tokens * groups * d_in * ACT_BYTES)
            )
        total = total.plus(part, share[group.where])
    return total


def expected_nodes_per_token(model: ModelSpec, nodes: int) -> float:
    """Distinct nodes a token's routed experts sit on, experts spread evenly over `nodes`:
    nodes x (1 - P(a node holds none of them)), choosing top-k without replacement; under
    group-limited routing (DeepSeek's node-limited routing: the expert groups are the nodes'
    shares) the token's experts come from `expert_groups_per_token` groups, so the same count
    over groups instead of experts."""
    if nodes <= 1:
        return float(nodes)
    pool, pick = model.experts, model.experts_per_token
    g, gk = model.expert_groups, model.expert_groups_per_token
    if g >= nodes and g % nodes == 0 and 0 < gk < g:
        pool, pick = g, gk
    pick = min(pick, pool)
    miss = math.comb(pool - pool // nodes, pick) / math.comb(pool, pick)
    return nodes * (1.0 - miss)


def node_deduplicated_dispatch_s(ctx: ModelContext, size: float, ep: int, tier: Tier) -> float:
    """One dispatch (or combine) of a node-deduplicating dispatcher (DeepEP; Megatron-Core's
    flex dispatcher): each token crosses the network once per remote node its experts sit on,
    through the sending GPU's own NIC, then fans out to the experts' GPUs over NVLink (the two
    stages pipeline, so the slower sets the time). `size`: the bytes a plain all-to-all would
    send per rank (every token-expert pair)."""
    m = ctx.model
    k = tier.ranks_per_node
    nodes = ep // k
    per_copy = size / m.experts_per_token
    remote = expected_nodes_per_token(m, nodes) * (nodes - 1) / nodes
    # the tier's all-to-all bus bandwidth is the NIC rate x (n-1)/(n-k) (ModelContext.tier)
    nic = tier.bw_for("all_to_all") * (ep - k) / (ep - 1) * GB
    network = per_copy * remote / nic
    inside = ctx.tier(k, k)
    fan_out = collective_time_s("all_to_all", size, k, inside)
    return max(network, fan_out) + tier.alpha_s


def _attention_core(ctx: ModelContext, t: float, tp: int, mb: int, cp: int) -> tuple[float, float]:
    """(forward, backward) seconds of the attention core for one layer and microbatch."""
    m = ctx.model
    kernel = ctx.job.attention_kernel
    if kernel in ("flash", "flash2"):
        flops = ctx.attn_fwd_flops_per_token_layer * t / tp  # causal: masked blocks skipped
        rate = ctx.peak16_flops * ctx.compute_fraction
        # over one context-parallel chunk: measured on this device (bench attention) or its
        # die by sequence length, else the papers' fractions, at the model's head dimension;
        # local layers (sliding windows, Llama 4's chunks) at their window's kernel length
        # (plan/attention_rate.py)
        r_fwd, r_bwd = chunk_attention_rates(
            ctx.hw, kernel, ctx.job.seq_len, cp, ctx.peak16_flops, m
        )
        fwd = flops / (rate * r_fwd.fraction)
        bwd = ATTENTION_BWD_FLOP_FACTOR * flops / (rate * r_bwd.fraction)
        return fwd, bwd
    # unfused: two batched GEMMs over the full s x s scores plus the softmax/dropout traffic
    s = int(ctx.job.seq_len / cp)
    heads = max(int(mb * m.heads / tp), 1)
    qk = _gemm(ctx, s, s, m.head_dim, heads, dtype="bf16")
    pv = _gemm(ctx, s, m.v_head_dim, s, heads, dtype="bf16")
    scores = heads * float(s) * s
    fwd = (qk[0] + pv[0]) / ctx.compute_fraction + scores * UNFUSED_SCORE_BYTES_FWD / ctx.bw_bytes_s
    bwd = (qk[1] + pv[1]) / ctx.compute_fraction + scores * UNFUSED_SCORE_BYTES_BWD / ctx.bw_bytes_s
    return fwd, bwd


def logits_time_s(ctx: ModelContext, tp: int, cp: int, mb: int) -> float:
    """Output projection forward+backward plus the cross-entropy, one microbatch."""
    key = (tp, cp, mb)
    cache = ctx.cache("logits")
    hit = cache.get(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    t = mb * ctx.job.seq_len / cp
    # the vocabulary projection stays 16-bit in fp8 recipes (Transformer Engine runs only its
    # own layers in fp8; Megatron-Core's output layer is a plain 16-bit linear)
    dt = "bf16" if ctx.job.dtype == "fp8" else None
    f, b = _gemm(ctx, t, ctx.model.vocab / tp, ctx.model.hidden, dtype=dt)
    f, b = f / ctx.compute_fraction, b / ctx.compute_fraction
    ce = t * ctx.model.vocab / tp * CROSS_ENTROPY_TRAFFIC_BYTES / ctx.bw_bytes_s
    res = f + b + ce
    cache[key] = res
    return res


@dataclass(frozen=True, slots=True)
class StepBreakdown:
    """Seconds per training step, by where the time goes (they add up to step_time_s)."""

    compute: float
    recompute: float
    tp_comm: float
    cp_comm: float
    ep_comm: float
    pp_comm: float
    bubble: float
    dp_comm: float
    optimizer: float
    other: float
    #: seconds of the attention core inside `compute` and `recompute` (not added again to the
    #: step): how attention-bound the step is (interval.py's attention-bound regime)
    attention: float = 0.0
    #: seconds of Muon's Newton-Schulz iterations and their TP gathers inside `optimizer`
    newton_schulz: float = 0.0

    @property
    def attention_share(self) -> float:
        """The attention core's share of the step's compute (recompute included)."""
        work = self.compute + self.recompute
        return self.attention / work if work > 0 else 0.0

    @property
    def step_time_s(self) -> float:
        return (
            self.compute
            + self.recompute
            + self.tp_comm
            + self.cp_comm
            + self.ep_comm
            + self.pp_comm
            + self.bubble
            + self.dp_comm
            + self.optimizer
            + self.other
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "compute_s": self.compute,
            "recompute_s": self.recompute,
            "tp_comm_exposed_s": self.tp_comm,
            "cp_comm_exposed_s": self.cp_comm,
            "ep_comm_exposed_s": self.ep_comm,
            "pp_comm_exposed_s": self.pp_comm,
            "pipeline_bubble_s": self.bubble,
            "dp_comm_exposed_s": self.dp_comm,
            "optimizer_s": self.optimizer,
            "other_s": self.other,
        }


def mtp_time_s(ctx: ModelContext, lay: Layout, layer_s: float, logits: float) -> float:
    """Seconds per microbatch of the job's multi-token-prediction modules (TrainJob.mtp_layers,
    DeepSeek-V3 §2.2): each runs one more layer (`layer_s`: the average layer with its
    communication and recompute), its h x 2h projection of the normed hidden state and the
    shifted token's embedding, and the shared output head with its own cross-entropy
    (`logits`)."""
    if not ctx.job.mtp_layers:
        return 0.0
    t = lay.microbatch * ctx.job.seq_len / lay.cp
    h = ctx.model.hidden
    pf, pb = _gemm(ctx, t, h / lay.tp, 2 * h)
    return ctx.job.mtp_layers * (layer_s + (pf + pb) / ctx.gemm_fraction + logits)


def full_recompute_layer_s(ctx: ModelContext, lc: LayerCost) -> float:
    """Seconds a full activation checkpoint re-runs of one layer and microbatch: its forward
    with its TP, expert and context-parallel communication, less the work after its last
    saved tensor where the framework's checkpoint skips it (TrainJob.recompute_skips_tail)."""
    unit = lc.compute_fwd + lc.tp_fwd + lc.ep_fwd + lc.cp_fwd
    if ctx.job.recompute_skips_tail:
        unit -= lc.tail_fwd
    return unit


def _layout_pace(
    ctx: ModelContext,
    lay: Layout,
    pl: PipelineLayout,
    lc: LayerCost,
    per_layer_total: float,
    rc_layer: float,
    rc_attn: float,
    logits: float,
    mtp: float = 0.0,
) -> tuple[int, float, float, float]:
    """(layers, extra seconds, recompute per layer, attention re-run per layer) of the rank that
    paces a step under an explicit pipeline layout: each rank runs its own layers (block
    recompute re-runs up to recompute_layers of each of its virtual stages), the loss rank the
    logits as well and the MTP rank its modules (`mtp`)."""
    unit = full_recompute_layer_s(ctx, lc)  # one fully recomputed layer
    block = lay.recompute == "full"
    best: tuple[float, int, float, int] | None = None
    for rank in range(pl.pp):
        n = pl.rank_layers[rank]
        n_rc = n  # layers recomputed on this rank (block recompute: per virtual stage)
        if block and lay.recompute_layers:
            n_rc = sum(min(lay.recompute_layers, c) for c in pl.rank_chunks(rank))
        rc = n_rc * unit if block else n * rc_layer
        extra = (logits if rank == pl.loss_rank else 0.0) + (mtp if rank == pl.mtp_rank else 0.0)
        t = n * per_layer_total + rc + extra
        if best is None or t > best[0]:
            best = (t, rank, extra, n_rc)
    assert best is not None
    _, rank, extra, n_rc = best
    n = pl.rank_layers[rank]
    if not block or n == 0:
        return n, extra, rc_layer, rc_attn
    return n, extra, n_rc * unit / n, n_rc / n * lc.attn_fwd


def step_breakdown(ctx: ModelContext, lay: Layout, microbatches: int) -> StepBreakdown:
    m = microbatches
    lc = layer_cost(
        ctx, lay.tp, lay.cp, lay.microbatch, lay.sequence_parallel, lay.ep, lay.expert_tp
    )
    logits = logits_time_s(ctx, lay.tp, lay.cp, lay.microbatch)
    layers_first = stage_layers(ctx.layers, lay.pp, lay.vpp)
    layers_last = ctx.layers // lay.pp if lay.pp > 1 else ctx.layers
    comp_layer = lc.compute_fwd + lc.compute_bwd
    per_layer_total = (
        comp_layer + lc.tp_fwd + lc.tp_bwd + lc.cp_fwd + lc.cp_bwd + lc.ep_fwd + lc.ep_bwd
    )
    rc_attn = 0.0  # attention core re-run in the backward
    if lay.recompute == "full":
        share = lay.recompute_share(ctx.layers)  # block recompute: some layers of each chunk
        rc_layer = share * full_recompute_layer_s(ctx, lc)
        rc_attn = share * lc.attn_fwd
    elif lay.recompute == "selective":
        rc_layer = rc_attn = lc.attn_fwd
    elif lay.recompute == "op":
        # the re-run matmuls' share of the layer's forward GEMM time (workload/flops.py)
        share = ctx.recompute_flops_per_token["op"] / (2.0 * max(ctx.counts.layer_matmul_active, 1))
        if ctx.job.eager_pointwise:
            # per-op SAC saves matmul and attention outputs only (torchtitan's _save_list):
            # every eager pointwise op runs again, each its own kernel
            rc_layer = (lc.compute_fwd - lc.attn_fwd - lc.pointwise_fwd) * share
            rc_layer += lc.pointwise_fwd
        else:
            rc_layer = (lc.compute_fwd - lc.attn_fwd) * share
        # the save list keeps matmul outputs and the sequence-parallel reduce-scatters, not the
        # all-gathered linear inputs (torchtitan parallelize_llama.py _save_list at 820504e,
        # June 2025: aten.mm, the SDPA outputs, _c10d_functional.reduce_scatter_tensor,
        # aten.max): the backward gathers both again for the re-run matmuls and the weight
        # gradients that read them
        rc_layer += lc.tp_gather_fwd
    elif lay.recompute in POLICIES:  # MaxText's remat policies (xla_memory.py)
        rc_layer = policy_recompute_s(ctx, lay, lc.compute_fwd, lc.attn_fwd)
        rc_attn = lc.attn_fwd if policy_recomputes_attention(ctx, lay) else 0.0
    else:
        rc_layer = 0.0
    # multi-token-prediction modules, on the last rank unless a layout places them
    mtp = mtp_time_s(ctx, lay, per_layer_total + rc_layer, logits)
    # the slowest stage sets the pace: the first (most layers) or the last (layers + logits)
    pl = ctx.pipeline(lay.pp)
    if lay.pp == 1:
        n_layers, extra = ctx.layers, logits + mtp
    elif pl is not None:
        # an explicit layout: every rank's own layers, the loss rank's logits (pipeline_layout.py)
        n_layers, extra, rc_layer, rc_attn = _layout_pace(
            ctx, lay, pl, lc, per_layer_total, rc_layer, rc_attn, logits, mtp
        )
    elif (
        layers_first * (per_layer_total + rc_layer)
        >= layers_last * (per_layer_total + rc_layer) + logits + mtp
    ):
        n_layers, extra = layers_first, 0.0
    else:
        n_layers, extra = layers_last, logits + mtp
    stage = n_layers * (per_layer_total + rc_layer) + extra
    # pipeline point-to-point: activations forward, gradients backward, per virtual stage
    pp_mb = 0.0
    tied_s = 0.0
    if lay.pp > 1:
        size = lay.microbatch * ctx.job.seq_len / lay.cp * ctx.model.hidden * ACT_BYTES
        if ctx.job.scatter_gather() or lay.sequence_parallel:
            size /= lay.tp
        tier = ctx.tier(2, ctx.job.gpus)
        exposed = OVERLAP_COMPUTE_TAX if ctx.job.pp_overlap(lay.vpp) else PP_EXPOSED_FRACTION
        pp_mb = 2.0 * lay.vpp * collective_time_s("send_recv", size, 2, tier) * exposed
        tied_s = tied_embedding_s(ctx, lay)
    per_mb = stage + pp_mb
    bubble = (lay.pp - 1) / lay.vpp * per_mb
    mb_fwd = n_layers * lc.compute_fwd
    mb_bwd = n_layers * lc.compute_bwd
    dp = dp_exposed_s(ctx, lay, m, mb_fwd, mb_bwd + n_layers * rc_layer)
    # what the optimizer updates and the gradients cover: every weight, or LoRA's adapters
    p_first, _, p_exp = trainable_stage_params(ctx, lay.tp, lay.pp, lay.ep, lay.expert_tp)
    shard = ctx.shard_group(lay.tp, lay.dp, lay.cp, lay.hsdp) if lay.zero >= 1 else 1
    shard_e = expert_shard_group(lay, shard) if lay.zero >= 1 else 1
    updated = p_first / shard + p_exp / shard_e
    opt = updated * (ctx.recipe.total + ADAM_EXTRA_WRITE_BYTES) / ctx.bw_bytes_s
    ns = muon_step_s(ctx, lay, n_layers) if ctx.job.optimizer == "muon" else 0.0
    opt += ns
    # ZeRO-2/3: what the framework does to every microbatch's unsharded gradients in HBM before
    # the reduce-scatter (frameworks.ZERO_GRAD_HANDLING)
    other = STEP_FIXED_S
    if lay.zero >= 2 and lay.dp * lay.cp > 1:
        reduce = grad_reduce_bytes(ctx.recipe)
        per_param = zero_grad_handling_bytes(reduce, ctx.job.profile.zero_grad_handling)
        other += m * (p_first + p_exp) * per_param / ctx.bw_bytes_s
    return StepBreakdown(
        compute=m * (n_layers * comp_layer + extra),
        recompute=m * n_layers * rc_layer,
        tp_comm=m * n_layers * (lc.tp_fwd + lc.tp_bwd),
        cp_comm=m * n_layers * (lc.cp_fwd + lc.cp_bwd),
        ep_comm=m * n_layers * (lc.ep_fwd + lc.ep_bwd),
        pp_comm=m * pp_mb + tied_s,
        bubble=bubble,
        dp_comm=dp,
        optimizer=opt,
        other=other,
        attention=m * n_layers * (lc.attn_fwd + lc.attn_bwd + rc_attn),
        newton_schulz=ns,
    )


def muon_step_s(ctx: ModelContext, lay: Layout, n_layers: int) -> float:
    """Seconds of Muon's orthogonalisation on the busiest rank of the stage with `n_layers`
    layers (plan/train/muon.py): each matrix's TP gather and Newton-Schulz iterations on the whole
    matrix ("duplicated" mode), by the rank that owns it: every rank under ZeRO-0, one of the
    data-parallel group (experts: of the expert data-parallel group) under ZeRO-1, whole
    matrices per rank, so the busiest owner takes at least the largest one."""
    key = ("muon", lay.tp, lay.dp, lay.cp, lay.ep, lay.expert_tp, lay.zero, n_layers)
    cache = ctx.cache("muon")
    hit = cache.get(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    mats = layer_matrices(ctx.model)
    frac_moe = ctx.n_moe / ctx.model.layers
    tp_tier = ctx.tier(lay.tp, lay.tp) if lay.tp > 1 else None
    etp = lay.expert_tp
    etp_tier = ctx.tier(etp, etp) if etp > 1 else None

    def one(rows: int, cols: int, group: int, tier: Tier | None) -> float:
        t = newton_schulz_s(rows, cols, ctx.hw, ctx.compute_fraction)
        return t + (tp_gather_s(rows, cols, group, tier) if tier is not None else 0.0)

    dense = [one(r, c, lay.tp, tp_tier) for r, c in mats.dense_layer]
    moe = [one(r, c, lay.tp, tp_tier) for r, c in mats.moe_layer]
    expert = [one(r, c, etp, etp_tier) for r, c in mats.expert]
    local = ctx.model.experts // lay.ep if ctx.model.is_moe else 0
    shared_total = n_layers * ((1.0 - frac_moe) * sum(dense) + frac_moe * sum(moe))
    expert_total = n_layers * frac_moe * local * sum(expert)
    if lay.zero >= 1:
        owners, expert_owners = lay.dp * lay.cp, lay.expert_dp
        largest = max([*dense, *moe, *expert], default=0.0)
        res = max(shared_total / owners + expert_total / expert_owners, largest)
    else:
        res = shared_total + expert_total
    cache[key] = res
    return res
