"""`flopwise bench comms`: collective bandwidth under torchrun or srun (rank 0 reports)."""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli._args import (
    add_bench_outputs,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    typed,
)


def _size(text: str) -> int:
    from flopwise.units import parse_size_bytes

    return int(parse_size_bytes(text, "size"))


def _ops(text: str) -> tuple[str, ...]:
    from flopwise.bench.comms import OPS
    from flopwise.errors import FlopwiseError

    names = tuple(t.strip().replace("-", "_") for t in text.split(",") if t.strip())
    if names == ("all",):
        return OPS
    bad = [n for n in names if n not in OPS]
    if bad or not names:
        raise FlopwiseError(f"unknown op {', '.join(bad) or text!r}; valid: all, {', '.join(OPS)}")
    return names


def _factor(text: str) -> float:
    from flopwise.errors import FlopwiseError

    value = non_negative_float(text)
    if value <= 1:
        raise FlopwiseError(f"{text!r} must be greater than 1 (sizes grow by this factor)")
    return value


def register(bsub: Any) -> None:
    p = bsub.add_parser(
        "comms",
        help="collective bandwidth (all_reduce, all_gather, ...) as nccl-tests measures it",
        description="Collective bus bandwidth across the ranks of a torchrun or srun job "
        "(nccl-tests definitions: algbw = bytes/time, busbw = algbw x op factor, GB = 1e9). "
        "Run as: torchrun --nproc_per_node N -m flopwise bench comms. Rank 0 prints and stores.",
    )
    p.add_argument("--backend", default="auto", help="auto (nccl on CUDA, gloo on CPU) or a name")
    p.add_argument(
        "--ops",
        type=typed(_ops),
        default="all",
        help="comma-separated: all_reduce,all_gather,reduce_scatter,all_to_all,broadcast,"
        "send_recv (default all)",
    )
    p.add_argument("--min-bytes", "-b", type=typed(_size), default=None, metavar="SIZE",
                   help="smallest size, e.g. 32K (default 32K)")  # fmt: skip
    p.add_argument("--max-bytes", "-e", type=typed(_size), default=None, metavar="SIZE",
                   help="largest size, e.g. 1G (default 1G on accelerators, 16M on CPU)")  # fmt: skip
    p.add_argument("--factor", "-f", type=typed(_factor), default=2.0,
                   metavar="X", help="size multiplier (default 2)")  # fmt: skip
    p.add_argument(
        "--dtype", default="float32", help="float32 (default), bfloat16, float16, float64"
    )
    p.add_argument("--iterations", "-n", type=positive_int, default=20, metavar="N",
                   help="timed iterations per size (default 20)")  # fmt: skip
    p.add_argument("--warmup", "-w", type=typed(non_negative_int), default=5, metavar="N",
                   help="warm-up iterations per size (default 5)")  # fmt: skip
    p.add_argument(
        "--group",
        choices=("all", "intra", "inter"),
        default="all",
        help="all ranks; ranks inside each node; or one rank per node across nodes",
    )
    p.add_argument("--timeout", type=positive_float, default=300.0, metavar="S",
                   help="seconds before a missing or hung rank fails the run (default 300)")  # fmt: skip
    p.add_argument("--accelerator", metavar="ID",
                   help="catalog id to file the result under (default: detected)")  # fmt: skip
    add_bench_outputs(p, out=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from flopwise.bench import comms, dist
    from flopwise.present import cluster_view

    accelerator = None
    if args.accelerator:
        from flopwise.catalog.accelerators import get_accelerator

        accelerator = get_accelerator(args.accelerator).id
    # Validate everything before joining the job, so bad flags fail fast on every rank.
    backend, device_type = dist.resolve_backend(args.backend)
    max_default = (
        comms.DEFAULT_MAX_BYTES_CPU if device_type == "cpu" else comms.DEFAULT_MAX_BYTES_DEVICE
    )
    min_bytes = args.min_bytes or comms.DEFAULT_MIN_BYTES
    cfg = comms.CommsConfig(
        ops=args.ops,
        min_bytes=min_bytes,
        max_bytes=args.max_bytes or max(max_default, min_bytes),
        factor=args.factor,
        dtype=args.dtype,
        iterations=args.iterations,
        warmup=args.warmup,
        group=args.group,
    )
    from flopwise.present.bench_view import comms_progress
    from flopwise.results.safe_save import keep, preflight

    if dist.env_from().rank == 0:
        preflight(args.db)  # rank 0 stores: an unusable --db fails before anything runs
    problem = None
    with dist.session(backend, args.timeout) as s:
        with comms_progress(enabled=s.rank == 0) as on_row:
            result = comms.run_comms(s, cfg, on_row)
        if s.rank == 0:
            accelerator = accelerator or comms.accelerator_id(s)
            measured, acc = result, accelerator
            outcome = keep(
                "comms", result.to_dict(), lambda: comms.store_result(measured, s, acc, args.db)
            )
            problem = outcome.problem
            result = dataclasses.replace(result, result_id=outcome.result_id)
            if args.json:
                cluster_view.comms_json(result)
            else:
                cluster_view.comms_table(result, accelerator)
        if not result.interrupted:
            s.store_barrier("the end of the run")
    if problem is not None:
        from flopwise.errors import FlopwiseError

        raise FlopwiseError(problem)
    return 130 if result.interrupted else 0
