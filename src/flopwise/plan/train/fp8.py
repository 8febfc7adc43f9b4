"""What an FP8 recipe costs around every FP8 linear layer: the cast and rescale bytes of its
three GEMMs, the GEMMs' time at the recipe's rates, and the sum over one transformer layer.

The recipes themselves (what each library casts, in which dtype it gathers, which GEMM kernel
it runs, with sources) are data in ``fp8_recipes.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .fp8_recipes import BF16_BYTES, FP8_BYTES, PRODUCER_FP8_CAST_BYTES, Fp8Recipe

if TYPE_CHECKING:
    from flopwise.hardware import Hardware

    from .context import ModelContext


@dataclass(frozen=True, slots=True)
class LinearCastBytes:
    """HBM bytes the FP8 recipe moves around one linear layer's three GEMMs (fwd + bwd)."""

    input_bytes: float  # casting the M x K input
    weight_bytes: float  # casting the K x N weight
    grad_output_bytes: float  # casting the M x N output gradient
    rescale_bytes: float  # rescaling the backward GEMMs' outputs (row-wise recipes)
    kernels: int  # memory-bound kernels launched

    @property
    def total(self) -> float:
        return self.input_bytes + self.weight_bytes + self.grad_output_bytes + self.rescale_bytes


def linear_cast_bytes(
    m: int, k: int, n: int, recipe: Fp8Recipe, fused: bool = False, weight_cast: bool = True
) -> LinearCastBytes:
    """Cast (and rescale) bytes of one FP8 linear, (m x k) @ (k x n), forward and backward.

    `fused`: the activations' amax read fuses into the kernels that produced them (inside a
    torch.compile'd model); `weight_cast`: the weight is cast here (a stand-alone linear), not
    on the FSDP shard before a float8 all-gather. A tensor-wise recipe with ``weight_cast``
    pays the amax read and two casts (forward and transposed), as torchao's roofline counts.
    """
    act = recipe.act_bytes(fused)
    w_bytes = recipe.weight_cast_bytes
    w_kernels = recipe.weight_cast_kernels
    if weight_cast and w_bytes == 0.0:
        # cast here rather than on a shard (tensor-wise) or once per step (delayed/current)
        w_bytes = recipe.amax_read_bytes + 2 * (BF16_BYTES + FP8_BYTES)
        w_kernels = 3
    rescale = (m * k + k * n) * 2 * BF16_BYTES if recipe.bwd_output_rescale else 0.0
    kernels = 2 * recipe.act_cast_kernels + (w_kernels if weight_cast else 0)
    kernels += 2 if recipe.bwd_output_rescale else 0
    return LinearCastBytes(
        input_bytes=m * k * act,
        weight_bytes=k * n * w_bytes if weight_cast else 0.0,
        grad_output_bytes=m * n * act,
        rescale_bytes=rescale,
        kernels=kernels,
    )


def linear_time_s(
    m: int,
    k: int,
    n: int,
    hw: Hardware,
    recipe: Fp8Recipe | None,
    fused: bool = False,
    launches: bool = True,
) -> float:
    """Forward + backward seconds of one stand-alone linear, (m x k) @ (k x n): the three
    GEMMs at the shape model's rate (plan/gemm.py), in bf16 when `recipe` is None, else in FP8
    with the recipe's casts at the achievable HBM bandwidth, one launch per cast kernel.

    ``launches=False`` counts GPU kernel time only, as torchao's float8 linear microbenchmark
    does (benchmarks/float8/float8_roofline.py sums kernel durations from the profiler): GEMM
    kernels without their launch, and each cast kernel at least KERNEL_FILL_DRAIN_S."""
    from flopwise.plan.efficiency import KERNEL_LAUNCH_S
    from flopwise.plan.gemm import gemm_estimate
    from flopwise.plan.gemm_ceiling import bandwidth_bytes_per_s
    from flopwise.plan.gemm_constants import KERNEL_FILL_DRAIN_S

    def gemm(a: int, b: int, c: int, dtype: str) -> float:
        est = gemm_estimate(a, b, c, hw, dtype)
        return est.time_s if launches else est.kernel_s

    if recipe is None:
        return gemm(m, n, k, "bf16") + gemm(m, k, n, "bf16") + gemm(k, n, m, "bf16")
    gemms = gemm(m, n, k, recipe.gemm_dtype) / recipe.fwd_gemm_fraction
    gemms += gemm(m, k, n, recipe.gemm_dtype) / recipe.dgrad_gemm_fraction
    gemms += gemm(k, n, m, recipe.wgrad_dtype)
    cast = linear_cast_bytes(m, k, n, recipe, fused=fused, weight_cast=True)
    cast_s = cast.total / bandwidth_bytes_per_s(hw)
    if launches:
        return gemms + cast_s + cast.kernels * KERNEL_LAUNCH_S
    return gemms + max(cast_s, cast.kernels * KERNEL_FILL_DRAIN_S)


@dataclass(frozen=True, slots=True)
class LayerCastCost:
    """Seconds one transformer layer's FP8 casts cost per microbatch on one GPU."""

    fwd_s: float
    bwd_s: float


def layer_cast_cost(
    ctx: ModelContext, recipe: Fp8Recipe, t: float, tp: int, sp: bool, ep: int
) -> LayerCastCost:
    """Cast, transpose and rescale traffic of one average layer's FP8 linears, one microbatch.

    `t` tokens on this GPU. Element counts per token, tensor-parallel-local: the two 16-bit
    inputs of the attention and MLP blocks (one cast each: the Q/K/V and gate/up projections
    share their input), the attention-output and down-projection inputs; the output gradients of
    every projection. Where the framework builds the layer from Transformer Engine's
    LayerNormLinear/LayerNormMLP and the recipe lets their norm and activation kernels write FP8
    themselves, those inputs cost only the transposed copy (PRODUCER_FP8_CAST_BYTES).
    With sequence parallelism a recipe that all-gathers in FP8 casts the local
    shard (t/tp rows), one that gathers in 16-bit casts the gathered tensor. Inside a model the
    amax read fuses into the producing kernel where the recipe allows (torch.compile).
    """
    m = ctx.model
    h = m.hidden
    kv_local = max(m.kv_heads / tp, 1.0)
    mult = 2 if m.gated_mlp else 1
    frac_moe = ctx.n_moe / m.layers
    width = m.ffn if not m.is_moe else m.experts_per_token * m.expert_ffn
    q_kv = (m.heads * m.head_dim) / tp + kv_local * (m.head_dim + m.v_head_dim)
    attn_in = m.heads * m.v_head_dim / tp
    # without sequence parallelism the block input is replicated: every rank casts all of it
    h_in = h / tp if sp and recipe.fp8_tp_all_gather else float(h)
    go_elems = q_kv + mult * width / tp + 2.0 * h_in
    act = recipe.act_bytes(fused=True)
    # the attention norm's output (QKV input); in dense layers also the MLP norm's output (FC1
    # input) and the activation output (FC2 input). Megatron-Core's MoE layers norm separately
    # (TENorm, the router reads it) and run the activation outside the grouped expert GEMMs,
    # so their FC1/FC2 inputs are cast as any 16-bit tensor.
    te_fused = recipe.producer_writes_fp8 and ctx.job.profile.te_layernorm_modules
    produced_bytes = PRODUCER_FP8_CAST_BYTES if te_fused else act
    grad_act = act  # the output gradients keep their cast-transpose (not traced for LoRA)
    if ctx.frozen and recipe.library == "transformer-engine":
        # LoRA: a frozen linear's weight gradient is not computed, so Transformer Engine makes
        # no transposed FP8 copy of its input (TE 1.8 module/linear.py: the input transpose
        # only `if weight.requires_grad`); a producer-written input then costs nothing beyond
        # its producer (LoRA's Q/K/V adapter reads the norm's 16-bit output besides)
        act -= FP8_BYTES
        produced_bytes = 0.0 if te_fused else act
    mlp_in = h_in + width / tp
    fwd_elems_bytes = h_in * produced_bytes + attn_in * act
    fwd_elems_bytes += (1 - frac_moe) * mlp_in * produced_bytes + frac_moe * mlp_in * act
    fwd_bytes = fwd_elems_bytes * t
    bwd_bytes = go_elems * t * grad_act
    # TP-local weights of the layer (all local experts for a MoE layer)
    dense_w = (mult + 1) * m.ffn * h / tp if m.ffn else 0.0
    moe_w = (m.experts // ep) * (mult + 1) * m.expert_ffn * h / tp if m.is_moe else 0.0
    weights = h * q_kv + attn_in * h + (1 - frac_moe) * dense_w + frac_moe * moe_w
    w_bytes = weights * recipe.weight_cast_bytes
    fwd_bytes += w_bytes / 2
    bwd_bytes += w_bytes / 2
    if recipe.bwd_output_rescale:
        # data-gradient outputs (M x K per input projection GEMM) and weight-gradient outputs
        # (K x N), read + written
        separate = ctx.job.profile.separate_projections
        in_proj = (2 if m.is_mla else 3) + mult if separate else 2
        dgrad = in_proj * h + attn_in + width / tp
        bwd_bytes += (dgrad * t + weights) * 2 * BF16_BYTES
    return LayerCastCost(fwd_s=fwd_bytes / ctx.bw_bytes_s, bwd_s=bwd_bytes / ctx.bw_bytes_s)
