"""Activation bytes per layer and the loss buffers, per recompute mode and framework.

Korthikanti et al. 2022 (arXiv:2205.05198) Table 2 per layer, per token, 16-bit, adapted (see
memory.py); torchtitan's op-level selective checkpointing; Transformer Engine's fp8 saved
inputs; PyTorch tensor parallelism's saved all-gathered inputs; the loss buffers of Megatron,
PyTorch-native and fused cross-entropy.
"""

from __future__ import annotations

from typing import cast

from flopwise.workload.remat import POLICIES

from .constants import (
    ACT_BYTES,
    FUSED_LOSS_BYTES_PER_ELEMENT,
    LOGITS_BYTES_PER_ELEMENT,
    TORCH_LOSS_BYTES_PER_ELEMENT,
    UNFUSED_SCORE_BYTES_STORED,
)
from .context import ModelContext
from .layout import Layout
from .xla_memory import is_xla, policy_layer_bytes

#: Recipes that train fp8 GEMMs through Transformer Engine (Megatron-Core, NeMo).
TE_FP8_RECIPES = frozenset({"mcore-fp8", "nemo-fp8", "fp8-adam"})


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
    if sp and tp > 1 and ctx.recipe.name.startswith("fsdp") and not is_xla(ctx):
        # PyTorch tensor parallelism (DTensor SequenceParallel -> ColwiseParallel) all-gathers
        # the norm output and the matmul saves that gathered input; Megatron saves its shard and
        # re-gathers in the backward (Korthikanti §4.2.2). XLA's SPMD all-gather before a
        # matmul is a temporary of that matmul, not a residual (xla_memory.py)
        hidden_part += 2.0 * h * (1.0 - 1.0 / tp)
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
    if ctx.recipe.name in TE_FP8_RECIPES:
        # Transformer Engine saves an fp8 GEMM's input for its weight-gradient GEMM as the fp8
        # cast (1 byte) and drops the 16-bit tensor when nothing else needs it: the two norm
        # outputs (LayerNormLinear / LayerNormMLP ln_out) and the MLP activation output (fc2
        # input). Attention's output stays 16-bit: FlashAttention keeps it for its backward.
        norm_outputs = 2.0 * h / (tp if sp else 1)
        act_out = (1 - frac_moe) * m.ffn / tp + frac_moe * (
            m.experts_per_token * m.expert_ffn / tp + m.shared_experts * m.shared_expert_ffn / tp
        )
        per_token -= 0.5 * (norm_outputs + act_out)
    if ctx.frozen:
        per_token += _lora_saved_inputs_delta(ctx, h / (tp if sp else 1), m.ffn / tp, frac_moe)
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


def _lora_saved_inputs_delta(
    ctx: ModelContext, norm_out: float, act_out: float, frac_moe: float = 0.0
) -> float:
    """Elements per token LoRA changes among the saved linear inputs of a dense layer (QKV's
    and FC1's the norms' outputs, FC2's the activation's output; the attention projection's
    input is the attention output, which the attention kernel keeps anyway). A frozen linear
    saves no input for the weight gradient it does not compute (Transformer Engine >= 1.6, TE
    #739: `ln_out if weight.requires_grad else None`; PyTorch autograd saves a matmul's input
    only when the weight needs a gradient); a targeted linear's adapter keeps that input in
    16-bit for its A gradient (NeMo's LoRA asks LayerNormLinear for `return_layernorm_output`),
    in place of Transformer Engine's FP8 copy. MoE layers' MLP inputs (the experts' tokens)
    are left as full training keeps them: an upper bound."""
    te_fp8 = ctx.recipe.name in TE_FP8_RECIPES
    targets = ctx.job.lora_target_names
    delta = 0.0
    for name, elems, share in (
        ("qkv", norm_out, 1.0),
        ("fc1", norm_out, 1.0 - frac_moe),
        ("fc2", act_out, 1.0 - frac_moe),
    ):
        counted = 0.5 * elems if te_fp8 else elems  # as layer_activation_bytes counted it
        delta += share * ((elems if name in targets else 0.0) - counted)
    return delta


def op_checkpoint_bytes(ctx: ModelContext, tp: int, cp: int, mb: int, sp: bool) -> float:
    """Bytes per layer per microbatch torchtitan's op-level selective checkpointing keeps
    (parallelize_llama.py _save_list: matmul outputs except every second matmul of the block,
    the attention outputs): the block input, wq's and wv's outputs (q, v), the attention output
    and log-sum-exp, w1's output and (gated blocks) w2's output."""
    m = ctx.model
    tokens = mb * ctx.job.seq_len / cp
    hidden = m.hidden / (tp if sp else 1)
    q = m.heads / tp * m.head_dim
    v = max(m.kv_heads / tp, 1.0) * m.v_head_dim
    o = m.heads / tp * m.v_head_dim
    lse = 2.0 * m.heads / tp
    if m.is_moe:
        ffn = m.experts_per_token * m.expert_ffn + m.shared_experts * m.shared_expert_ffn
    else:
        ffn = m.ffn
    per_token = hidden + q + v + o + lse + ffn / tp + (hidden if m.gated_mlp else 0.0)
    return per_token * tokens * ACT_BYTES


def _layer_bytes(ctx: ModelContext, lay: Layout) -> tuple[float, float, float]:
    """layer_activation_bytes of the layout, cached per (tp, cp, microbatch, sp)."""
    key = (lay.tp, lay.cp, lay.microbatch, lay.sequence_parallel)
    cache = ctx.cache("act")
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = layer_activation_bytes(
            ctx, lay.tp, lay.cp, lay.microbatch, lay.sequence_parallel
        )
    return cast("tuple[float, float, float]", hit)


def host_offload_bytes(ctx: ModelContext, lay: Layout) -> float:
    """Bytes per layer-microbatch a MaxText remat policy offloads to pinned host memory."""
    if lay.recompute not in POLICIES:
        return 0.0
    return policy_layer_bytes(ctx, lay, _layer_bytes(ctx, lay)[0])[2]


def layer_acts(ctx: ModelContext, lay: Layout) -> tuple[float, float]:
    """(bytes kept per layer-microbatch, one layer's working set rebuilt by full recompute)."""
    full, selective_saves, layer_input = _layer_bytes(ctx, lay)
    if lay.recompute in POLICIES:
        # MaxText's named remat policies: what stays in HBM, what goes to host, the rest rebuilt
        kept, working, _host = policy_layer_bytes(ctx, lay, full)
        return kept, working
    if lay.recompute == "full":
        # block recompute: the recomputed layers keep their input, the others everything
        share = lay.recompute_share(ctx.layers)
        return share * layer_input + (1.0 - share) * full, full
    if lay.recompute == "op":
        # the backward re-runs one layer's recomputed ops at a time: its working set
        return op_checkpoint_bytes(ctx, lay.tp, lay.cp, lay.microbatch, lay.sequence_parallel), full
    if lay.recompute == "selective":
        return full - selective_saves, 0.0
    return full, 0.0


def logits_bytes(ctx: ModelContext, lay: Layout) -> float:
    """The last stage's logits buffer for one microbatch (vocab-parallel over TP)."""
    tokens = lay.microbatch * ctx.job.seq_len / lay.cp
    if not ctx.recipe.name.startswith("fsdp"):
        per_element = LOGITS_BYTES_PER_ELEMENT
    elif ctx.job.fused_loss:
        per_element = FUSED_LOSS_BYTES_PER_ELEMENT
    else:
        per_element = TORCH_LOSS_BYTES_PER_ELEMENT
    return tokens * ctx.model.vocab / lay.tp * per_element
