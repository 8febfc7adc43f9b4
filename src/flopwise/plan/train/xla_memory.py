"""What XLA on TPU (MaxText) holds in HBM, where it differs from the PyTorch/CUDA frameworks.

- Buffers are assigned statically at compile time from their live ranges (XLA's buffer
  assignment and heap simulator): no CUDA context, NCCL communicators or caching allocator
  (those are charged to GPUs only, memory.py), and a buffer freed before another is allocated
  shares its space. So the loss phase (the logits and their gradient) and the backward of a
  layer (that layer's rebuilt activations, its gathered weights and their gradients) are two
  peaks, not one sum: the logits die when the loss's backward has produced the gradient of the
  last hidden state, before the first layer's backward allocates. The PyTorch frameworks keep
  the sum: their published peaks are the caching allocator's reserved bytes, which keep freed
  blocks (validate/memory.py).
- FSDP over a scanned layer stack (MaxText ``scan_layers=True``, ``ici_fsdp_parallelism``)
  all-gathers one layer's weights inside each loop iteration: "parameter All-Gather collectives
  lie exposed on the critical execution path before every layer's forward computation"
  (AI-Hypercomputer/maxtext PR #4493, 2026, which adds a one-layer lookahead as an opt-in).
  So one layer's gathered 16-bit weights, and in the backward their 16-bit gradients before
  the reduce-scatter, are live at once (PyTorch FSDP prefetches a second layer).
- Remat policies (workload/remat.py) keep some named tensors in HBM, move some to pinned host
  memory (``offload_dst="pinned_host"``) and recompute the rest; an offloaded tensor comes back
  to HBM for its layer's backward, and the next layer's is fetched meanwhile. The copies'
  time is not modelled: the step time assumes XLA hides them under compute, as MaxText's
  HOST_OFFLOAD_FLAGS schedule them (benchmarks/xla_flags_library.py); the catalog has no
  sourced TPU host-link bandwidth to check that against, so the search never picks an
  offloading policy by itself (frameworks.py).
"""

from __future__ import annotations

from flopwise.workload.remat import POLICIES, recompute_matmul_params, residual_elements

from .constants import ACT_BYTES
from .context import ModelContext
from .layout import Layout

__all__ = [
    "XLA_FSDP_GATHERED_LAYERS",
    "is_xla",
    "policy_layer_bytes",
    "policy_recompute_s",
]

#: Layers whose gathered weights (and, in the backward, unsharded gradients) XLA holds at once
#: under FSDP over MaxText's scanned layers: the one computing (maxtext PR #4493, above).
XLA_FSDP_GATHERED_LAYERS = 1


def is_xla(ctx: ModelContext) -> bool:
    """The accelerator runs XLA-compiled programs with static buffer assignment (TPUs)."""
    return ctx.hw.id.startswith("tpu")


def policy_layer_bytes(
    ctx: ModelContext, lay: Layout, full_layer: float
) -> tuple[float, float, float]:
    """(HBM bytes kept per layer-microbatch, the working set of one layer's backward, host
    bytes per layer-microbatch) under a MaxText remat policy. ``full_layer`` is one layer's
    activations without recompute: the backward rebuilds what the policy did not keep, so one
    layer's working set is that less what is already counted as kept; its offloaded tensors
    come back to HBM and the next layer's are in flight."""
    on_device, on_host = residual_elements(
        ctx.model, lay.tp, lay.sequence_parallel, lay.recompute, ctx.job.remat_tensors
    )
    tokens = lay.microbatch * ctx.job.seq_len / lay.cp
    kept = on_device * tokens * ACT_BYTES
    host = on_host * tokens * ACT_BYTES
    working = max(full_layer - kept, 0.0) + host
    return kept, working, host


def policy_recompute_s(
    ctx: ModelContext, lay: Layout, compute_fwd: float, attn_fwd: float
) -> float:
    """Seconds per layer-microbatch the backward spends re-running forward work a MaxText remat
    policy did not keep: the attention core when it is recomputed, and the re-run projections'
    share of the layer's forward GEMM time."""
    if lay.recompute not in POLICIES:
        raise ValueError(f"not a MaxText remat policy: {lay.recompute!r}")
    matmul = 2.0 * recompute_matmul_params(ctx.model, lay.recompute, ctx.job.remat_tensors)
    share = matmul / (2.0 * max(ctx.counts.layer_matmul_active, 1))
    attention = policy_recomputes_attention(ctx, lay)
    return (compute_fwd - attn_fwd) * share + (attn_fwd if attention else 0.0)


def policy_recomputes_attention(ctx: ModelContext, lay: Layout) -> bool:
    """Whether a MaxText remat policy re-runs the attention core: its recompute FLOPs exceed
    those of the projections it re-runs."""
    total = ctx.recompute_flops_per_token[lay.recompute]
    matmul = 2.0 * recompute_matmul_params(ctx.model, lay.recompute, ctx.job.remat_tensors)
    return total - matmul > 0.0
