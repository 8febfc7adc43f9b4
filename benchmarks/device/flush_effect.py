"""How the cache flush between timed runs changes a GEMM's measured time, at decode shapes.

Times y = x @ W^T (bf16, N = K = 4096: 33.5 MB of weights, less than an H100's 50 MB L2) for
M = 1..1024 three ways: after a 256 MiB write (`zero_()`, mamf-finder's flush), after a
256 MiB read (`sum()`, flopwise's), and with no flush (W stays in L2). Each is the median of
50 event-timed runs. A write leaves the L2 full of dirty lines whose write-back the GEMM pays.

Usage (on a GPU machine): python benchmarks/device/flush_effect.py
"""

from __future__ import annotations

import torch
from gemm_stream import events_median_s  # beside this script

N = K = 4096
RUNS = 50
FLUSH_BYTES = 256 * 2**20


def _median_us(fn, before) -> float:  # type: ignore[no-untyped-def]
    for _ in range(5):
        before()
        fn()
    return events_median_s(fn, RUNS, before) * 1e6


def main() -> None:
    buf = torch.zeros(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    print("M, write_flush_us, read_flush_us, no_flush_us, weight_MB")
    for m in (1, 8, 32, 64, 128, 256, 512, 1024):
        x = torch.randn(m, K, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(m, N, device="cuda", dtype=torch.bfloat16)

        def run(x=x, out=out) -> None:  # type: ignore[no-untyped-def]
            torch.mm(x, w.t(), out=out)

        wr = _median_us(run, lambda: buf.zero_())
        rd = _median_us(run, lambda: buf.sum())
        no = _median_us(run, lambda: None)
        print(f"{m}, {wr:.1f}, {rd:.1f}, {no:.1f}, {N * K * 2 / 1e6:.1f}", flush=True)


if __name__ == "__main__":
    main()
