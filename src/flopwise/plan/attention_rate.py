"""What a fused causal attention kernel reaches on a device, by sequence length and head dim.

One function for both planners: the training step prices its attention forward and backward
with it (plan/train/step_time.py), a serving engine its prefill attention (plan/infer/latency.py
make_rates), so a kernel measured once (``flopwise bench attention``, or the GH100 die's
measured curve in plan/efficiency.py) moves both plans the same way.

Where the rate comes from, first match wins:

1. ``measured``: this device's own ``bench attention`` curve (its SDPA kernel, whatever the
   framework names: the measurement is what this stack runs), rate_inf x s / (s + s_half),
   at the head dimension it was measured at;
2. ``die``: the GH100 die's curve measured per kernel ("flash", "flash2") on an H100
   (efficiency.GH100_ATTENTION), at head dimension 128;
3. ``published``: a Blackwell die's kernel timed by NVIDIA by sequence length: cuDNN ("flash")
   on a GB200 or GB300 (efficiency.BLACKWELL_ATTENTION), FlashAttention-2 ("flash2") on a B200
   (efficiency.BLACKWELL_FA2_ATTENTION), at head dimension 128;
4. ``fa2-on-hopper``: FlashAttention-2 named on any other Hopper-or-newer GPU, the
   FlashAttention-3 paper's figures for it (efficiency.FA2_ON_HOPPER_*_FRACTION);
5. ``papers``: the FlashAttention papers' fractions of peak (efficiency.ATTENTION_*_FRACTION).

Every fraction is of the device's dense 16-bit peak and is then scaled to the model's head
dimension (plan/attention_head_dim.py). The caller multiplies by the die's sustained fraction.

A model with sliding-window layers (GPT-OSS, Gemma 2/3, Mistral 7B v0.1) runs those layers'
kernel over a window, not the sequence: each query block visits about `window` keys, so its
fixed cost (the curve's s_half) weighs against that work. A causal kernel over s tokens visits
s/2 keys per query block on average, so a window of w tokens runs at the curve's rate for
s = 2w (``local_kernel_length``; a chunked layer, Llama 4's, is a causal kernel over each
chunk). ``model_attention_rate`` combines the layer kinds by their
share of the FLOPs (time adds up, so the rates combine harmonically); it changes nothing where
the rate does not depend on length (the papers' constant fractions).
"""

from __future__ import annotations

from dataclasses import dataclass

from flopwise.hardware import Hardware
from flopwise.plan.attention_head_dim import REFERENCE_HEAD_DIM, head_dim_factor
from flopwise.plan.efficiency import (
    ATTENTION_BWD_FRACTION,
    ATTENTION_FWD_FRACTION,
    FA2_ON_HOPPER_BWD_FRACTION,
    FA2_ON_HOPPER_FWD_FRACTION,
    GH100_PREFIXES,
    HOPPER_OR_NEWER_PREFIXES,
    blackwell_attention_fraction,
    blackwell_attention_timed,
    blackwell_die,
    gh100_attention_fraction,
    rate_at_length,
)
from flopwise.workload.flops import causal_attention_split
from flopwise.workload.spec import ModelSpec

#: Bases of a rate that rest on a kernel timed on this device or its die (by this project or,
#: "published", by the die's vendor).
MEASURED_BASES: tuple[str, ...] = ("measured", "die", "published")

#: Where each basis's rate comes from, in words (a training plan's `attention.source`).
ATTENTION_BASIS_SOURCES: dict[str, str] = {
    "measured": "this device's own curve by sequence length (flopwise bench attention, --measured)",
    "die": "the GH100 die's curve by sequence length, measured on an H100 SXM at 700 W "
    "(2026-11-23: cuDNN 9.19 for 'flash', FlashAttention-2 through torch 2.11's SDPA for "
    "'flash2'; plan/efficiency.py GH100_ATTENTION)",
    "published": "NVIDIA's timings by sequence length on the Blackwell die (cudnn-frontend "
    "benchmark results: cuDNN for 'flash', FlashAttention-2 on B200 for 'flash2'; "
    "plan/efficiency.py BLACKWELL_ATTENTION, BLACKWELL_FA2_ATTENTION)",
    "fa2-on-hopper": "FlashAttention-2 on a Hopper-or-newer part no curve covers: the "
    f"FlashAttention-3 paper's {FA2_ON_HOPPER_FWD_FRACTION:.0%} forward and "
    f"~{FA2_ON_HOPPER_BWD_FRACTION:.0%} backward of H100's peak",
    "papers": "the FlashAttention papers' fractions of peak (forward "
    f"{ATTENTION_FWD_FRACTION:.2f}, backward {ATTENTION_BWD_FRACTION:.2f}), no curve by "
    "sequence length on this die",
}


@dataclass(frozen=True, slots=True)
class AttentionRate:
    """A fused attention kernel's achieved fraction of the dense 16-bit peak, and its basis."""

    fraction: float
    basis: str  # "measured" | "die" | "published" | "fa2-on-hopper" | "papers"

    @property
    def measured(self) -> bool:
        return self.basis in MEASURED_BASES


def fused_attention_rate(
    hw: Hardware,
    kernel: str,
    direction: str,
    seq_len: float,
    peak16_flops: float,
    head_dim: float,
    v_head_dim: float | None = None,
    matmul_speedup: float = 1.0,
) -> AttentionRate:
    """Fraction of `peak16_flops` a fused causal attention kernel ("flash" or "flash2") reaches
    in `direction` ("fwd" or "bwd") over `seq_len` keys, at the model's head dimensions.

    `matmul_speedup` > 1 when the kernel's matmuls run faster than 16-bit (FP8 attention); it
    only weighs the exponentials against the matmuls in the head-dim scaling, the caller
    multiplies the rate by it.
    """
    if direction not in ("fwd", "bwd"):
        raise ValueError(f"direction {direction!r}: expected 'fwd' or 'bwd'")
    reference = REFERENCE_HEAD_DIM
    curve = hw.attention_tflops_curve
    if curve and peak16_flops > 0:
        rate_inf, s_half = curve.get(direction, curve["fwd"])
        fraction = rate_at_length(rate_inf, s_half, seq_len) * 1e12 / peak16_flops
        reference = float(hw.attention_head_dim or REFERENCE_HEAD_DIM)
        basis = "measured"
    elif hw.id.startswith(GH100_PREFIXES):
        fraction = gh100_attention_fraction(kernel, direction, seq_len)
        basis = "die"
    elif (die := blackwell_die(hw.id)) and blackwell_attention_timed(kernel, die):
        fraction = blackwell_attention_fraction(die, direction, seq_len, kernel)
        basis = "published"
    elif kernel == "flash2" and hw.id.startswith(HOPPER_OR_NEWER_PREFIXES):
        fraction = FA2_ON_HOPPER_FWD_FRACTION if direction == "fwd" else FA2_ON_HOPPER_BWD_FRACTION
        basis = "fa2-on-hopper"
    else:
        fraction = ATTENTION_FWD_FRACTION if direction == "fwd" else ATTENTION_BWD_FRACTION
        basis = "papers"
    fraction *= head_dim_factor(
        hw.id, head_dim, v_head_dim, direction, matmul_speedup, reference_dim=reference
    )
    return AttentionRate(fraction, basis)


def local_kernel_length(seq_len: float, window: int, chunked: bool = False) -> float:
    """The causal sequence length whose kernel visits as many keys per query block as a
    local-attention layer of `window` tokens over `seq_len` (window 0: the whole sequence): a
    causal kernel visits s/2 keys per query on average, a sliding window w keys, so 2w; a chunk
    of w tokens is itself a causal sequence of w. Never above seq_len."""
    if window <= 0:
        return seq_len
    return min(seq_len, float(window) if chunked else 2.0 * window)


def model_attention_rate(
    hw: Hardware,
    kernel: str,
    direction: str,
    seq_len: float,
    peak16_flops: float,
    spec: ModelSpec,
    matmul_speedup: float = 1.0,
    kernel_len: float | None = None,
) -> AttentionRate:
    """`fused_attention_rate` over a model's layers: full-attention layers at the kernel's
    sequence (`kernel_len`, default `seq_len`; one context-parallel chunk under CP), local
    layers (sliding windows, chunks) at ``local_kernel_length`` of it, combined by their share
    of the causal attention FLOPs of a `seq_len` sequence (harmonically: seconds add up). One
    layer kind: the plain rate."""
    length = seq_len if kernel_len is None else kernel_len
    time_per_flop = 0.0
    basis = ""
    for part in causal_attention_split(spec, seq_len):
        rate = fused_attention_rate(
            hw,
            kernel,
            direction,
            local_kernel_length(length, part.window, part.chunked),
            peak16_flops,
            spec.head_dim,
            spec.v_head_dim,
            matmul_speedup,
        )
        basis = basis or rate.basis
        time_per_flop += part.share / rate.fraction
    return AttentionRate(1.0 / time_per_flop, basis)


def chunk_attention_rates(
    hw: Hardware, kernel: str, seq_len: float, cp: int, peak16_flops: float, spec: ModelSpec
) -> tuple[AttentionRate, AttentionRate]:
    """(forward, backward) `model_attention_rate` of a training step's fused kernel, whose
    sequence is one context-parallel chunk (`seq_len` / `cp`): what the step prices
    (plan/train/step_time.py) and what the plan reports (TrainPlan `attention`)."""
    chunk = seq_len / cp
    fwd, bwd = (
        model_attention_rate(hw, kernel, d, seq_len, peak16_flops, spec, kernel_len=chunk)
        for d in ("fwd", "bwd")
    )
    return fwd, bwd
