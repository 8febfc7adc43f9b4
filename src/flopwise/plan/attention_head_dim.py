"""How a fused attention kernel's rate depends on the head dimension.

Per (query, key) score a FlashAttention-style kernel does matmul work proportional to the head
dimension d on the tensor cores (forward: Q.K and P.V, 2d + 2d_v FLOPs; backward: five matmuls,
2.5x that) and a fixed amount of non-matmul work on the special-function units: one
exponential (forward: the softmax; backward: recomputing P). The FlashAttention-3 paper
(Shah et al. 2024, arXiv:2407.08608 §3.1) puts numbers on it for the H100 SXM5: 989 TFLOPS of
16-bit matmul against 3.9 TFLOPS of exponentials, so at head dimension 128 "there are 512x more
matmul FLOPS than exponential" and the exponentials "can take 50% of the cycle time compared to
matmul". That ratio is an architecture property (tensor-core FLOPs per SM per clock over
exponentials per SM per clock), so it is the same on every part of a die and is computed here
from those two numbers.

With beta the exponential time per score over the matmul time per score at d = 128, a kernel's
time per score is proportional to d/128 + beta, its work to d, so its achieved fraction of the
matmul peak at head dimension d, relative to the fraction measured (or published) at 128, is

    g(d) = (d / 128) * (1 + beta) / (d / 128 + beta)

This prices the exponentials as not overlapped with the matmuls (FlashAttention-2's schedule);
FlashAttention-3 and cuDNN's Hopper kernels hide part of them behind the other warpgroup's
matmul (ping-pong scheduling), so for those g is an upper bound on the effect of a head
dimension other than 128. Kernel rates elsewhere in flopwise are measured or published at
d = 128, so g(128) = 1 leaves every such figure as it is. Dies whose architecture numbers are
not in the table below get g = 1 (no head-dimension effect priced).
"""

from __future__ import annotations

from flopwise.catalog.accelerators import longest_id_prefix
from flopwise.plan.efficiency import ATTENTION_BWD_FLOP_FACTOR

#: Head dimension at which the kernel rates in plan/efficiency.py and the engine profiles were
#: measured or published (FlashAttention-2/3 papers' and benchmarks/device's head_dim 128).
REFERENCE_HEAD_DIM = 128.0

#: Dense 16-bit tensor-core FLOPs per SM per clock, and base-2 exponentials (MUFU.EX2) per SM
#: per clock, by die (id prefixes below).
#: - Tensor cores: A100 1,024 dense FP16/BF16 FMA per SM per clock (NVIDIA A100 Tensor Core GPU
#:   architecture whitepaper, 2020: 312 TFLOPS = 108 SMs x 2,048 FLOPs x 1.41 GHz); the H100 SM
#:   doubles A100's MMA rate clock for clock (NVIDIA H100 whitepaper, 2022: 989 TFLOPS = 132
#:   SMs x 4,096 x 1.83 GHz); Blackwell doubles Hopper's per SM (B200 2.25 dense PFLOPS over 148
#:   SMs at ~1.9 GHz).
#: - Exponentials: 16 per SM per clock (CUDA C++ Programming Guide, "Arithmetic Instructions",
#:   throughput of 32-bit base-2 exponential for compute capability 8.x-10.x), which with the
#:   H100's clock gives the 3.9 TFLOPS the FlashAttention-3 paper quotes. Blackwell Ultra
#:   (B300, GB300) doubles it (NVIDIA technical blog "Making Softmax More Efficient with NVIDIA
#:   Blackwell Ultra", 2026: "doubling SFU throughput over the standard NVIDIA Blackwell
#:   architecture" for MUFU.EX2).
TENSOR_FLOPS_AND_EXP_PER_SM_CLOCK: dict[str, tuple[float, float]] = {
    "ga100": (2048.0, 16.0),
    "gh100": (4096.0, 16.0),
    "gb100": (8192.0, 16.0),
    "gb110": (8192.0, 32.0),  # Blackwell Ultra
}

#: Die of each accelerator-id prefix for the table above (longest prefix wins).
EXP_DIE_OF_PREFIX: dict[str, str] = {
    "a100": "ga100",
    "a800": "ga100",
    "h100": "gh100",
    "h200": "gh100",
    "h800": "gh100",
    "h20": "gh100",
    "gh200": "gh100",
    "b200": "gb100",
    "gb200": "gb100",
    "b300": "gb110",
    "gb300": "gb110",
}


def exp_to_matmul_ratio(accelerator_id: str) -> float:
    """beta: exponential time per score over 16-bit matmul time per score at head dim 128, in
    the forward pass; 0 for dies not in the table (no head-dimension effect)."""
    best = longest_id_prefix(accelerator_id, EXP_DIE_OF_PREFIX)
    if not best:
        return 0.0
    tensor_flops, exps = TENSOR_FLOPS_AND_EXP_PER_SM_CLOCK[EXP_DIE_OF_PREFIX[best]]
    matmul_flops_per_score = 4.0 * REFERENCE_HEAD_DIM  # Q.K and P.V, 2d FLOPs each
    return (1.0 / exps) / (matmul_flops_per_score / tensor_flops)


def head_dim_factor(
    accelerator_id: str,
    head_dim: float,
    v_head_dim: float | None = None,
    direction: str = "fwd",
    matmul_speedup: float = 1.0,
    reference_dim: float = REFERENCE_HEAD_DIM,
) -> float:
    """g(d): the kernel's achieved fraction at this head dimension over its fraction at
    `reference_dim` (128: the catalog's and the papers' rates; a measured run's own head dim).

    ``head_dim``/``v_head_dim`` are the query-key and value head dimensions (MLA: 192 and 128);
    their mean sets the matmul work per score. ``direction`` is "fwd" or "bwd" (the backward
    does 2.5x the matmul work per exponential). ``matmul_speedup`` > 1 when the kernel's
    matmuls run faster than 16-bit (FP8 attention), which makes the exponentials weigh more.
    """
    if direction not in ("fwd", "bwd"):
        raise ValueError(f"direction {direction!r}: expected 'fwd' or 'bwd'")
    beta = exp_to_matmul_ratio(accelerator_id) * matmul_speedup
    if direction == "bwd":
        beta /= ATTENTION_BWD_FLOP_FACTOR  # 2.5x the matmul work, one exponential per score
    d = 0.5 * (head_dim + (v_head_dim if v_head_dim else head_dim))
    if beta <= 0.0 or d <= 0.0 or reference_dim <= 0.0:
        return 1.0
    return _g(d / REFERENCE_HEAD_DIM, beta) / _g(reference_dim / REFERENCE_HEAD_DIM, beta)


def _g(x: float, beta: float) -> float:
    """Achieved fraction at head dimension x * 128 over the fraction at 128."""
    return x * (1.0 + beta) / (x + beta)
