"""`flopwise bench memory`: BabelStream bandwidth (copy, mul, add, triad, dot) on a device."""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli._args import add_bench_outputs, add_device, positive_int, typed


def _size(text: str) -> int:
    from flopwise.units import parse_size_bytes

    return int(parse_size_bytes(text, "--array-size"))


def register(bsub: Any) -> None:
    p = bsub.add_parser(
        "memory",
        help="memory bandwidth (BabelStream kernels)",
        description="Measure memory bandwidth with BabelStream's copy, mul, add, triad and dot "
        "kernels through PyTorch (GB = 1e9 bytes), plus pinned host<->device copies on "
        "accelerators. Arrays default to several times the last-level cache.",
    )
    add_device(p)
    p.add_argument("--dtype", default="fp32", choices=("fp32", "fp64"), help="default fp32")
    p.add_argument(
        "--array-size",
        type=typed(_size),
        metavar="SIZE",
        help="bytes per array, e.g. 512MiB (default: max(4 x last-level cache, 256 MiB))",
    )
    p.add_argument("--iterations", type=positive_int, metavar="N", help="timed rounds")
    p.add_argument("--warmup", type=int, metavar="N", help="untimed rounds first (default 1)")
    add_bench_outputs(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flopwise.bench.device import parse_device_spec
    from flopwise.bench.memory import MemoryConfig, run_memory
    from flopwise.cli._bench_run import run_stored
    from flopwise.present import bench_view

    parse_device_spec(args.device)
    config = MemoryConfig(
        device=args.device,
        dtype=args.dtype,
        array_bytes=args.array_size,
        iterations=args.iterations,
        warmup=args.warmup,
    )
    return run_stored(
        "memory",
        "memory",
        args,
        config.device,
        lambda on_round, info: run_memory(config, on_round, info=info),
        bench_view.show_memory,
    )
