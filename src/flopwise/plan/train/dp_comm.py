"""Data-parallel traffic of one step: gradient reduction, ZeRO/FSDP/HSDP gathers, and the
tied-embedding reduction between the end pipeline stages; what of it is exposed.

Collectives use the alpha-beta model of plan/roofline.py on the tier the group spans; what
runs under compute costs OVERLAP_COMPUTE_TAX of its duration (NCCL's SMs and HBM traffic).

Sharded data parallelism (ZeRO-2/3, FSDP, HSDP) does not move the model in one collective: it
gathers and reduce-scatters one unit at a time, and each collective pays its own ring latency.
PyTorch FSDP and FSDP2 issue one all-gather and one reduce-scatter per wrapped module (the
transformer block in torchtitan's apply_fsdp and llm-foundry's fsdp_wrap_fn), DeepSpeed ZeRO-3
fetches per submodule and MaxText's scanned layers gather per layer. So these collectives are
charged per transformer block of the stage; the unsharded ZeRO-0/1 reduction stays one
collective (its buckets are large and their latency overlaps).
"""

from __future__ import annotations

from typing import cast

from flopwise.plan.roofline import Tier, collective_time_s

from .constants import ACT_BYTES, DP_OVERLAP_FRACTION, OVERLAP_COMPUTE_TAX
from .context import ModelContext
from .fp8_recipes import FP8_BYTES
from .layout import Layout
from .memory import _stage_params, trainable_stage_params
from .recipes import grad_reduce_bytes


def _stage_layers_max(ctx: ModelContext, lay: Layout) -> int:
    """Transformer layers of the busiest pipeline rank: an explicit layout's (TrainJob
    .pipeline_layout), else ceil(layers / pp)."""
    pl = ctx.pipeline(lay.pp)
    return max(max(pl.rank_layers), 1) if pl is not None else -(-ctx.layers // lay.pp)


def dp_exposed_s(ctx: ModelContext, lay: Layout, m: int, mb_fwd: float, mb_bwd: float) -> float:
    """Exposed data-parallel traffic per step (gradient reduction, ZeRO gathers); mb_fwd and
    mb_bwd are one microbatch's forward and backward (with recompute) compute on this stage."""
    n = lay.dp * lay.cp
    if n == 1:
        return 0.0
    key = (lay.tp, lay.pp, lay.dp, lay.cp, lay.ep, lay.zero, lay.hsdp, lay.etp)
    cache = ctx.cache("dp")
    hit = cache.get(key)
    if hit is None:
        p_first, _, p_exp = _stage_params(ctx, lay.tp, lay.pp, lay.ep, lay.expert_tp)
        rb = grad_reduce_bytes(ctx.recipe)
        gb = fsdp_gather_bytes_per_param(ctx)
        shard = ctx.shard_group(lay.tp, lay.dp, lay.cp, lay.hsdp)
        n_exp = lay.expert_dp
        # sharded stages move one transformer block per collective (module docstring)
        units = _stage_layers_max(ctx, lay) if lay.zero >= 2 else 1

        def coll(op: str, n_bytes: float, group: int, tier: Tier) -> float:
            return units * collective_time_s(op, n_bytes / units, group, tier)

        # LoRA: gradients (and ZeRO-1/2's updated shards) cover the adapters only; ZeRO-3
        # still gathers the frozen base weights it shards
        t_first, _, t_exp = trainable_stage_params(ctx, lay.tp, lay.pp, lay.ep, lay.expert_tp)

        def traffic(params: float, group: int, s: int, trained: float) -> tuple[float, float]:
            """(gradient reduction, parameter gather) seconds for `params` over a DP group of
            `group` ranks sharded in groups of `s` (s = group unless HSDP); `trained`: the part
            of them that carries gradients (all but under LoRA)."""
            if lay.zero < 3:
                params = trained
            if group <= 1 or not params:
                return 0.0, 0.0
            tier = ctx.tier(group, lay.tp * n)
            if lay.zero == 0:
                return collective_time_s("all_reduce", trained * rb, group, tier), 0.0
            if s >= group:
                return (
                    coll("reduce_scatter", trained * rb, group, tier),
                    coll("all_gather", params * gb, group, tier),
                )
            # HSDP: reduce-scatter and gather inside the node, then all-reduce each GPU's
            # shard with its replicas in the other nodes (FSDP HYBRID_SHARD post-backward)
            inner = ctx.tier(s, lay.tp * s)
            reps = group // s
            outer = ctx.tier(reps, lay.tp * n)
            red = coll("reduce_scatter", trained * rb, s, inner)
            red += coll("all_reduce", trained / s * rb, reps, outer)
            return red, coll("all_gather", params * gb, s, inner)

        a = traffic(p_first, n, shard, t_first)
        b = traffic(p_exp, n_exp, min(shard, n_exp), t_exp)
        hit = (a[0] + b[0], a[1] + b[1])
        cache[key] = hit
    reduce_s, gather_s = cast("tuple[float, float]", hit)

    def exposed(comm: float, window: float) -> float:
        hidden = min(comm, DP_OVERLAP_FRACTION * window)
        return comm - hidden + OVERLAP_COMPUTE_TAX * hidden

    if lay.zero <= 1:
        if not ctx.job.dp_overlap(lay.pp):
            # reduced after the last backward, gathered after the optimizer: all exposed
            return reduce_s + gather_s
        # gradients reduce under the last microbatch's backward; the parameter all-gather
        # after the optimizer overlaps the next step's first forward
        return exposed(reduce_s, mb_bwd) + exposed(gather_s, mb_fwd)
    layers = _stage_layers_max(ctx, lay)
    if lay.zero == 2:
        # gradients reduce-scattered after every microbatch's backward; the parameters are
        # gathered once per step, block by block under the first microbatch's forward (FSDP
        # SHARD_GRAD_OP keeps them until the backward is done), the first block exposed
        return (
            m * exposed(reduce_s, mb_bwd)
            + reduce_s / layers
            + exposed(gather_s, mb_fwd)
            + gather_s / layers
        )
    # ZeRO-3 / FSDP, every microbatch: the forward gathers each layer's weights under the
    # previous layer's forward; the backward gathers them again and reduce-scatters the
    # gradients under the backward (and recompute) of the neighbouring layer. Each phase hides
    # only what fits under its own compute; the first layer's gather and the last layer's
    # reduce-scatter have nothing to hide under
    fwd = exposed(gather_s, mb_fwd)
    bwd = exposed(gather_s + reduce_s, mb_bwd)
    return m * (fwd + bwd + (2.0 * gather_s + reduce_s) / layers)


def fsdp_gather_bytes_per_param(ctx: ModelContext) -> float:
    """Bytes per parameter of a ZeRO/FSDP parameter all-gather: 16-bit, except the transformer
    layers' linear weights under an FP8 recipe that gathers them in FP8 (plan/train/fp8_recipes.py);
    embeddings, norms and the output projection stay 16-bit."""
    if ctx.job.dtype != "fp8" or not ctx.fp8_recipe.fp8_fsdp_all_gather:
        return ACT_BYTES
    c = ctx.counts
    linear = (c.attention + c.mlp + c.experts + c.shared_experts) / max(c.total, 1)
    return ACT_BYTES * (1.0 - linear) + FP8_BYTES * linear


def tied_embedding_s(ctx: ModelContext, lay: Layout) -> float:
    """All-reduce of the tied word-embedding gradient between the first and the last pipeline
    stage, after the pipeline flush and before the optimizer (Megatron-LM
    _allreduce_embedding_grads / finalize_model_grads; DeepSpeed ReduceTiedGrads): exposed."""
    if ctx.counts.lm_head or not ctx.counts.embedding:
        return 0.0
    rows = ctx.counts.output_projection / lay.tp
    tier = ctx.tier(2, ctx.job.gpus)
    return collective_time_s("all_reduce", rows * grad_reduce_bytes(ctx.recipe), 2, tier)
