"""`flopwise bench sustained`: a GEMM's burst rate against its rate under sustained load."""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli._args import add_bench_outputs, add_device, positive_float, positive_int


def register(bsub: Any) -> None:
    p = bsub.add_parser(
        "sustained",
        help="GEMM rate under sustained load (power cap, clocks) against its burst rate",
        description="Time a large square GEMM briefly (its burst rate), then back to back for "
        "--seconds in --window windows, with the SM clock and board power where the backend "
        "reports them. The share of the burst rate the second half keeps (gemm_share) is what "
        "plans of this device run their GEMMs at with --measured: serving engines at the "
        "share itself, training steps at it times what a step loses beside the power cap "
        "(launch gaps, overlapped collectives). A --dtype fp8 run (per-tensor scaled "
        "torch._scaled_mm) prices FP8 GEMMs, a 16-bit one the rest. Defaults: 8192^3 bf16 for "
        "30 s in 2 s windows on an accelerator, 1024^3 fp32 for 6 s in 1 s windows on a CPU.",
    )
    add_device(p)
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32", "fp8"), help="GEMM dtype")
    p.add_argument("--size", type=positive_int, metavar="N", help="N x N x N GEMM")
    p.add_argument("--seconds", type=positive_float, metavar="S", help="load duration")
    p.add_argument("--window", type=positive_float, metavar="S", help="seconds per recorded window")
    add_bench_outputs(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flopwise.bench.device import parse_device_spec
    from flopwise.bench.sustained import SustainedConfig, run_sustained
    from flopwise.cli._bench_run import run_stored
    from flopwise.present import bench_view

    parse_device_spec(args.device)
    config = SustainedConfig(
        device=args.device,
        dtype=args.dtype,
        size=args.size,
        seconds=args.seconds,
        window_s=args.window,
    )
    return run_stored(
        "sustained",
        "sustained load",
        args,
        config.device,
        lambda on_round, info: run_sustained(config, on_round, info=info),
        bench_view.show_sustained,
    )
