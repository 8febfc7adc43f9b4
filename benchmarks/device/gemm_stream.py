"""Per-GEMM cost of decode-shape GEMMs run back to back, as an inference engine runs them.

An engine's decode step is a stream of GEMMs, each reading its own weights from HBM, usually
captured in a CUDA graph. For each (N, K) and M, this captures L GEMMs over L distinct weight
matrices (together over 4x the L2, so each is read cold) in a graph, replays it, and reports
the time per GEMM; also the same stream launched eagerly, and one GEMM timed alone between
events after a cache-flushing read (what `flopwise bench matmul` measures). bf16 via torch.mm,
fp8 via torch._scaled_mm with per-tensor scales (cuBLASLt), both NT layout. One CSV row per
case on stdout.

Usage (on a GPU machine): python benchmarks/device/gemm_stream.py > gemm_stream.csv
"""

from __future__ import annotations

import math
import statistics

import torch

SHAPES_NK = ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (1280, 8192), (8192, 1024))
MS = (1, 8, 32, 64, 128, 256, 512, 1024)
MIN_STREAM_BYTES = 4 * 50 * 2**20
REPLAYS = 20


def events_median_s(fn, runs: int, before=None) -> float:  # type: ignore[no-untyped-def]
    """Median seconds of `runs` event-timed calls of fn, each after `before` (untimed)."""
    pairs = []
    for _ in range(runs):
        if before is not None:
            before()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        pairs.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs) / 1e3


def main() -> None:
    dev = torch.device("cuda")
    flush = torch.zeros(64 * 2**20, dtype=torch.int32, device=dev)
    one = torch.ones((), device=dev, dtype=torch.float32)
    empty = events_median_s(lambda: None, 50, before=lambda: flush.sum())
    print(f"# empty event pair after a flush: {empty * 1e6:.2f} us")
    print("dtype,m,n,k,weights,graph_us_per_gemm,eager_us_per_gemm,alone_us,weight_mb")
    for dtype in ("bf16", "fp8"):
        for n, k in SHAPES_NK:
            wbytes = n * k * (2 if dtype == "bf16" else 1)
            layers = max(8, math.ceil(MIN_STREAM_BYTES / wbytes))
            if dtype == "bf16":
                ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) for _ in range(layers)]
            else:
                ws = [
                    torch.randn(n, k, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
                    for _ in range(layers)
                ]
            for m in MS:
                if dtype == "bf16":
                    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                    outs = [torch.empty(m, n, device=dev, dtype=torch.bfloat16) for _ in ws]

                    def stream(x=x, outs=outs, ws=ws) -> None:  # type: ignore[no-untyped-def]
                        for w, o in zip(ws, outs, strict=True):
                            torch.mm(x, w.t(), out=o)
                else:
                    x = torch.randn(m, k, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)

                    def stream(x=x, ws=ws) -> None:  # type: ignore[no-untyped-def]
                        for w in ws:
                            torch._scaled_mm(
                                x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
                            )

                for _ in range(3):
                    stream()
                torch.cuda.synchronize()
                eager = events_median_s(stream, 10) / layers
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    stream()
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    stream()
                g.replay()
                graph = events_median_s(g.replay, REPLAYS) / layers
                if dtype == "bf16":

                    def one_gemm(x=x, w=ws[0], o=outs[0]) -> None:  # type: ignore[no-untyped-def]
                        torch.mm(x, w.t(), out=o)
                else:

                    def one_gemm(x=x, w=ws[0]) -> None:  # type: ignore[no-untyped-def]
                        torch._scaled_mm(
                            x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
                        )

                alone = events_median_s(one_gemm, 30, lambda: flush.sum())
                print(
                    f"{dtype},{m},{n},{k},{layers},{graph * 1e6:.2f},{eager * 1e6:.2f},"
                    f"{alone * 1e6:.2f},{wbytes / 1e6:.1f}",
                    flush=True,
                )
                del g
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
