"""Do attention and GEMM rates hold under sustained load? (power cap, clocks, heat)

Runs each workload back to back for SECONDS and reports its rate per window, with the SM clock
and board power read from nvidia-smi at the end of each window: a large bf16 GEMM
(8192 x 8192 x 8192), the same GEMM in FP8 where the GPU has FP8 tensor cores, cuDNN fused
causal attention forward+backward and FlashAttention-2 forward+backward at 32K tokens (head_dim
128, 32 heads), then GEMMs and cuDNN attention interleaved at three attention shares. A
training step runs for hours at its power cap; a short benchmark may not reach it.

Usage (on a GPU machine): python benchmarks/device/sustained.py [SECONDS]
"""

from __future__ import annotations

import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

WINDOW_S = 2.0
PEAK_BF16 = 989.4e12


def smi() -> str:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip()


def run(name: str, fn, flops: float, seconds: float, peak: float = PEAK_BF16) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < WINDOW_S:
            fn()
            n += 1
            if n % 4 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        rate = n * flops / dt
        print(
            f"{name:10s} t={seconds - (t_end - time.perf_counter()):5.1f}s "
            f"{rate / 1e12:7.1f} TFLOPS ({rate / peak:.3f} of peak)  [{smi()}]",
            flush=True,
        )


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    dev = torch.device("cuda")
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    c = torch.empty(8192, 8192, device=dev, dtype=torch.bfloat16)
    run("gemm", lambda: torch.mm(a, b, out=c), 2.0 * 8192**3, seconds)
    # the same GEMM in FP8 (per-tensor scales, bf16 out; Hopper and newer): whether FP8 GEMMs
    # keep the bf16 GEMM's share of their burst rate at the power cap is what NeMo's FP8 rows
    # on GH100 ask: 5.6% faster than planned on average, Megatron-Bridge's H100 FP8 dense rows
    # 10-20% (docs/measured-h100.md, "Still to measure")
    if torch.cuda.get_device_capability(dev) >= (8, 9):
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev, dtype=torch.float32)
        run(
            "gemm_fp8",
            lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
            2.0 * 8192**3,
            seconds,
            2.0 * PEAK_BF16,
        )
    s, heads, d = 32768, 32, 128
    q, k, v = (
        torch.randn(1, heads, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
        for _ in range(3)
    )
    g = torch.randn(1, heads, s, d, device=dev, dtype=torch.bfloat16)
    fwd = 4.0 * heads * s * s * d / 2.0
    for name, backend in (
        ("cudnn", SDPBackend.CUDNN_ATTENTION),
        ("fa2", SDPBackend.FLASH_ATTENTION),
    ):

        def step(backend=backend) -> None:  # type: ignore[no-untyped-def]
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)

        run(name, step, 3.5 * fwd, seconds)

    # GEMMs and attention interleaved, as a training step runs them: the GPU's clock follows the
    # step's average power, so whether an attention kernel keeps its own sustained share (0.97
    # for cuDNN at 32K, against the GEMM's 0.79) inside a GEMM-heavy step is what this asks
    # (docs/training-planner.md, twelfth round). Each iteration runs `n_gemm` GEMMs and one
    # cuDNN attention forward + backward; the attention's share of the burst time is printed,
    # and the mix's rate against both kernels' sustained-alone rates says which clock it ran at.
    gemm_s = _timed(lambda: torch.mm(a, b, out=c))
    attn_s = _timed(lambda: _cudnn_step(q, k, v, g))
    for n_gemm in (1, 4, 16):
        share = attn_s / (attn_s + n_gemm * gemm_s)

        def mix(n_gemm: int = n_gemm) -> None:
            for _ in range(n_gemm):
                torch.mm(a, b, out=c)
            _cudnn_step(q, k, v, g)

        run(f"mix{share:.2f}", mix, n_gemm * 2.0 * 8192**3 + 3.5 * fwd, seconds)


def _cudnn_step(q, k, v, g) -> None:  # type: ignore[no-untyped-def]
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)


def _timed(fn, reps: int = 5) -> float:  # type: ignore[no-untyped-def]
    """Burst seconds of one call (after a warm-up), before the power cap bites."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps


if __name__ == "__main__":
    main()
