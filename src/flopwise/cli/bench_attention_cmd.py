"""`flopwise bench attention`: fused causal attention (PyTorch SDPA) by sequence length."""

from __future__ import annotations

import argparse
import re
from typing import Any

from flopwise.cli._args import add_bench_outputs, add_device, positive_int, typed


def parse_seq_lens(text: str) -> tuple[int, ...]:
    """'1024,2048,32K' -> (1024, 2048, 32768): whole numbers, K = 1024 as context lengths are
    written."""
    from flopwise.errors import FlopwiseError

    out = []
    for part in (p.strip() for p in text.split(",")):
        m = re.fullmatch(r"(\d+)([kK]?)", part)
        if not m:
            raise FlopwiseError(
                f"--seq-lens {text!r}: {part!r} is not a length; use e.g. 1024,2048,32K"
            )
        value = int(m.group(1)) * (1024 if m.group(2) else 1)
        if value < 2:
            raise FlopwiseError(f"--seq-lens {text!r}: lengths must be 2 or more")
        out.append(value)
    return tuple(out)


def register(bsub: Any) -> None:
    p = bsub.add_parser(
        "attention",
        help="fused causal attention TFLOPS by sequence length (PyTorch SDPA)",
        description="Time the causal attention core a training step runs, forward and "
        "backward, through PyTorch's scaled_dot_product_attention at a fixed number of tokens "
        "per call, for each sequence length. TFLOPS count the causal half of the square and "
        "the backward as 2.5x the forward, as the planner does; each direction is fitted to "
        "rate_inf x s / (s + s_half). `plan train --measured` then prices the attention core "
        "with this curve instead of the catalog's.",
    )
    add_device(p)
    p.add_argument(
        "--dtype",
        choices=("bf16", "fp16", "fp32"),
        help="bf16 (accelerator default: what training runs attention in), fp16, fp32 (CPU "
        "default: CPU plans run in fp32)",
    )
    p.add_argument(
        "--seq-lens",
        type=typed(parse_seq_lens),
        metavar="LIST",
        help="sequence lengths, e.g. 1024,2048,32K (default 1K-32K on accelerators, "
        "256-2048 on CPU)",
    )
    p.add_argument(
        "--head-dim", type=positive_int, default=128, metavar="D", help="default 128 (Llama's)"
    )
    p.add_argument("--heads", type=positive_int, metavar="N", help="default 32 (CPU 4)")
    p.add_argument(
        "--tokens",
        type=positive_int,
        metavar="N",
        help="tokens per call, batch = N / sequence length (default 32768; CPU 2048)",
    )
    p.add_argument(
        "--backend",
        default="auto",
        choices=("auto", "flash", "cudnn", "efficient", "math"),
        help="SDPA backend: auto (PyTorch's choice, what a framework gets) or one of them",
    )
    p.add_argument("--iterations", type=positive_int, metavar="N", help="timed runs per length")
    p.add_argument("--warmup", type=int, metavar="N", help="untimed runs per length first")
    add_bench_outputs(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flopwise.bench.attention import AttentionConfig, run_attention
    from flopwise.bench.device import parse_device_spec
    from flopwise.cli._bench_run import run_stored
    from flopwise.present import bench_view

    parse_device_spec(args.device)
    config = AttentionConfig(
        device=args.device,
        dtype=args.dtype,
        seq_lens=args.seq_lens,
        heads=args.heads,
        head_dim=args.head_dim,
        tokens=args.tokens,
        backend=args.backend,
        iterations=args.iterations,
        warmup=args.warmup,
    )
    return run_stored(
        "attention",
        "attention",
        args,
        config.device,
        lambda on_round, info: run_attention(config, on_round, info=info),
        bench_view.show_attention,
    )
