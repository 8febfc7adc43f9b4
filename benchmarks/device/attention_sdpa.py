"""Time PyTorch's fused causal attention kernels on the local accelerator, forward and backward.

For each SDPA backend (flash = FlashAttention-2 inside PyTorch, cuDNN, memory-efficient) and
sequence length, runs causal attention with head_dim 128 (Llama's) at a fixed number of tokens
per call, times forward and forward+backward with device events (median of the timed runs after
warm-up), and writes one CSV row per case: achieved TFLOPS counting the causal FLOPs the way
the planner does (4*b*h*s^2*d/2 forward; backward 2.5x forward, FlashAttention-2 paper §4.1).

Usage (on a GPU machine): python benchmarks/device/attention_sdpa.py OUT.csv
"""

from __future__ import annotations

import csv
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}
SEQ_LENS = (1024, 2048, 4096, 8192, 16384, 32768)
TOKENS_PER_CALL = 32768
HEADS = 32
HEAD_DIM = 128
WARMUP = 5
TIMED = 20
BWD_FLOP_FACTOR = 2.5


def _time(fn) -> float:  # type: ignore[no-untyped-def]
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(TIMED):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def main(path: str) -> None:
    dev = torch.device("cuda")
    rows = []
    for name, backend in BACKENDS.items():
        for s in SEQ_LENS:
            b = max(1, TOKENS_PER_CALL // s)
            q, k, v = (
                torch.randn(
                    b, HEADS, s, HEAD_DIM, device=dev, dtype=torch.bfloat16, requires_grad=True
                )
                for _ in range(3)
            )
            grad = torch.randn(b, HEADS, s, HEAD_DIM, device=dev, dtype=torch.bfloat16)
            flops_fwd = 4.0 * b * HEADS * s * s * HEAD_DIM / 2.0

            def fwd_only(q=q, k=k, v=v) -> None:  # type: ignore[no-untyped-def]
                F.scaled_dot_product_attention(q, k, v, is_causal=True)

            def fwd_bwd(q=q, k=k, v=v, grad=grad) -> None:  # type: ignore[no-untyped-def]
                F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)

            try:
                with sdpa_kernel(backend):
                    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    fwd = _time(fwd_only)
                    both = _time(fwd_bwd)
                with sdpa_kernel(SDPBackend.MATH):
                    check = F.scaled_dot_product_attention(
                        q[:1, :2].float(), k[:1, :2].float(), v[:1, :2].float(), is_causal=True
                    )
                err = float((ref[:1, :2].detach().float() - check.detach()).norm() / check.norm())
            except RuntimeError as exc:
                print(f"{name} s={s}: {str(exc).splitlines()[0]}")
                continue
            bwd = both - fwd
            row = {
                "backend": name,
                "seq_len": s,
                "batch": b,
                "heads": HEADS,
                "head_dim": HEAD_DIM,
                "fwd_ms": round(fwd * 1e3, 4),
                "bwd_ms": round(bwd * 1e3, 4),
                "fwd_tflops": round(flops_fwd / fwd / 1e12, 1),
                "bwd_tflops": round(BWD_FLOP_FACTOR * flops_fwd / bwd / 1e12, 1),
                "rel_err_vs_fp32": f"{err:.2e}",
            }
            rows.append(row)
            print(row, flush=True)
            torch.cuda.empty_cache()
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1])
