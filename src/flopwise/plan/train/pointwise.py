"""The memory-bound pointwise work of one transformer layer: norms, residual adds, the MLP's
activation, rotary embeddings, and what moves tokens between experts.

Three ways a framework runs it, each priced as bytes through HBM at the achievable bandwidth:

``fused`` (Megatron-Core and NeMo through Transformer Engine, Apex and their fused kernels;
  torch.compile, whose Inductor fuses each chain of pointwise ops into one kernel; the generic
  profile): one kernel per step of the layer, each reading its inputs and writing its output
  once: a norm reads h and writes h, a residual add reads 2h and writes h (constants.
  HIDDEN_ELEMENTWISE_PER_LAYER), the gated activation reads two and writes one element per
  MLP column, RoPE reads and writes q and k once; the backward moves twice the forward's bytes
  (constants.MEMORY_BOUND_BWD_FACTOR).
``xla`` (FrameworkProfile.fused_pointwise: MaxText): pointwise work rides on the matmuls
  around it; only the norms' reductions read their input (constants.FUSED_NORM_READS_PER_LAYER).
``eager`` (torchtitan without ``--training.compile``): one kernel per PyTorch op, as its model
  code is written; the bytes of every op are counted from the op graph itself
  (EAGER_BYTES_PER_ELEMENT, traced by scripts/trace_pointwise.py). Its RMSNorm upcasts to
  fp32, squares, averages, takes the reciprocal root, scales, downcasts and multiplies by the
  weight, each a kernel: 36 bytes per element forward where a fused norm moves 4. On a Llama
  3 8B layer the eager chains move 3.3x the fused bytes forward and 3.0x backward.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from flopwise.plan.train.constants import (
    ACT_BYTES,
    FUSED_NORM_READS_PER_LAYER,
    HIDDEN_ELEMENTWISE_PER_LAYER,
    MEMORY_BOUND_BWD_FACTOR,
)

if TYPE_CHECKING:
    from flopwise.plan.train.context import ModelContext
    from flopwise.plan.train.job import TrainJob

#: How a layer's pointwise work runs (module docstring).
POINTWISE_KERNELS: tuple[str, ...] = ("fused", "xla", "eager")

#: Bytes through HBM per element, (forward, backward), of each chain of eager PyTorch ops a
#: torchtitan Llama block runs between its matmuls, in bf16 activations: counted op by op by
#: scripts/trace_pointwise.py (a TorchDispatchMode adding up each kernel's tensor inputs and
#: outputs; torch 2.13, CPU: the ops and dtypes are those a GPU dispatches), for the code of
#: torchtitan 9dec370 (Dec 2024; the same at 3e3909a0, Nov 2024): torchtitan/models/norms.py
#: ``RMSNorm`` (norm_type "rmsnorm", the train_configs' default), torchtitan/models/llama/
#: model.py ``apply_rotary_emb`` (q and k as complex fp32 pairs), ``FeedForward``
#: (``w2(F.silu(w1(x)) * w3(x))``). Per element of: the hidden width for the norms and the
#: residual (whose backward sums the gradients of the stream's two branches), an MLP column for
#: the activations, a query or key head column for RoPE. ``one_kernel_norm`` is a norm that is
#: one kernel each way (traced as torch's LayerNorm; torchtitan's norm_type fused_rmsnorm, a
#: Triton kernel, moves the same: read x, write y; read dy and x, write dx); ``gelu`` a
#: non-gated MLP's activation. tests/train/test_pointwise.py re-traces them.
EAGER_BYTES_PER_ELEMENT: Mapping[str, tuple[float, float]] = MappingProxyType(
    {
        "rms_norm": (36.0, 92.0),
        "one_kernel_norm": (4.0, 6.0),
        "residual": (6.0, 6.0),
        "gated_act": (10.0, 18.0),
        "gelu": (4.0, 6.0),
        "rope": (20.0, 22.0),
    }
)

#: Where EAGER_BYTES_PER_ELEMENT comes from, for plans and validate.
EAGER_SOURCE = (
    "eager PyTorch ops of torchtitan's Llama block (9dec370: RMSNorm with norm_type rmsnorm, "
    "complex-fp32 RoPE, silu * mul, repeat_kv), bytes traced op by op (scripts/"
    "trace_pointwise.py)"
)


def repeat_kv_bytes(n_rep: float) -> float:
    """Bytes per key/value element, forward and backward alike, of torchtitan's ``repeat_kv``
    for grouped-query attention: the head is copied once per query head sharing it (read 2,
    write 2 x n_rep), and the backward sums the copies back (read 2 x n_rep, write 2)."""
    return 2.0 + 2.0 * n_rep


def pointwise_kernels(job: TrainJob) -> str:
    """How the job's framework runs the layer's pointwise work (POINTWISE_KERNELS)."""
    if job.profile.fused_pointwise:
        return "xla"
    return "eager" if job.eager_pointwise else "fused"


def pointwise_summary(job: TrainJob) -> dict[str, str | None]:
    """What a plan says about its pointwise kernels: which, and on what it rests."""
    kind = pointwise_kernels(job)
    if kind == "xla":
        what = "fused into the matmuls by the compiler (XLA); the norms' reductions read once"
    elif kind == "fused":
        what = "one fused kernel per norm, residual add, activation and RoPE"
        if job.compile:
            what += " (torch.compile)"
    else:
        what = "eager PyTorch ops, one kernel each (--compile fuses them)"
        if job.fused_norm:
            what += "; each norm one fused kernel"
    return {"kernels": kind, "what": what, "source": EAGER_SOURCE if kind == "eager" else None}


def layer_pointwise_bytes(
    ctx: ModelContext, tp: int, sp: bool, frac_moe: float
) -> tuple[float, float]:
    """(forward, backward) bytes per token through HBM of one layer's pointwise work on one
    GPU (tensor parallel degree `tp`, sequence parallel `sp`; `frac_moe` of the layers MoE)."""
    m = ctx.model
    h_local = m.hidden / (tp if sp else 1)
    kv_local = max(m.kv_heads / tp, 1.0)
    qk_columns = (m.heads / tp + kv_local) * m.head_dim
    kind = pointwise_kernels(ctx.job)
    if kind != "eager":
        fused = kind == "xla"
        per_h = FUSED_NORM_READS_PER_LAYER if fused else HIDDEN_ELEMENTWISE_PER_LAYER
        elems = per_h * h_local
        act_mult = 3.0 if m.gated_mlp else 2.0
        if not fused:
            elems += (1 - frac_moe) * act_mult * m.ffn / tp
        if m.is_moe:
            # token dispatch and combine move data between experts: no matmul to ride on
            expert_act = 0.0 if fused else act_mult * m.expert_ffn / tp
            elems += frac_moe * m.experts_per_token * (4.0 * m.hidden + expert_act)
        if ctx.rope and not fused:
            elems += 2.0 * qk_columns
        fwd = elems * ACT_BYTES
        return fwd, MEMORY_BOUND_BWD_FACTOR * fwd
    b = EAGER_BYTES_PER_ELEMENT
    eager_norm = m.norm == "rmsnorm" and not ctx.job.fused_norm
    norm = b["rms_norm"] if eager_norm else b["one_kernel_norm"]
    act = b["gated_act"] if m.gated_mlp else b["gelu"]
    fwd = h_local * (m.norms_per_layer * norm[0] + 2 * b["residual"][0])
    bwd = h_local * (m.norms_per_layer * norm[1] + 2 * b["residual"][1])
    fwd += (1 - frac_moe) * act[0] * m.ffn / tp
    bwd += (1 - frac_moe) * act[1] * m.ffn / tp
    if m.is_moe:
        moved = frac_moe * m.experts_per_token * 4.0 * m.hidden * ACT_BYTES
        fwd += moved + frac_moe * m.experts_per_token * act[0] * m.expert_ffn / tp
        bwd += MEMORY_BOUND_BWD_FACTOR * moved
        bwd += frac_moe * m.experts_per_token * act[1] * m.expert_ffn / tp
    if ctx.rope:
        fwd += b["rope"][0] * qk_columns
        bwd += b["rope"][1] * qk_columns
    if m.qk_norm:
        fwd += norm[0] * qk_columns
        bwd += norm[1] * qk_columns
    if not m.is_mla and m.heads > m.kv_heads:
        copied = repeat_kv_bytes(m.heads / m.kv_heads) * kv_local * (m.head_dim + m.v_head_dim)
        fwd += copied
        bwd += copied
    return fwd, bwd
