"""`flopwise plan train`."""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli._args import add_json, fraction, non_negative_float, positive_int, tokens, typed


def register(psub: Any) -> None:
    t = psub.add_parser(
        "train",
        help="training time, GPU-hours, cost and memory",
        description="Estimate training time, GPU-hours, cost and memory per GPU for MODEL.",
    )
    t.add_argument(
        "model", metavar="MODEL", help="catalog id, alias, HF repo name or config.json path"
    )
    t.add_argument(
        "--accelerator",
        "-a",
        required=True,
        metavar="ID",
        help="accelerator id or alias (see flopwise catalog accelerators)",
    )
    t.add_argument(
        "--gpus", type=positive_int, required=True, metavar="N", help="number of accelerators"
    )
    t.add_argument(
        "--tokens",
        type=typed(tokens),
        required=True,
        metavar="N",
        help="training tokens: 15T, 300B, 2e12",
    )
    t.add_argument(
        "--seq-len",
        type=positive_int,
        metavar="N",
        help="sequence length (default: min(context, 4096))",
    )
    t.add_argument(
        "--dtype", default="bf16", choices=("bf16", "fp16", "fp8"), help="GEMM dtype (default bf16)"
    )
    t.add_argument(
        "--mfu",
        type=typed(fraction),
        metavar="X",
        help="assumed MFU for the first-order estimate (default 0.40)",
    )
    t.add_argument(
        "--price-per-gpu-hour",
        type=typed(non_negative_float),
        metavar="USD",
        help="price per GPU-hour for the cost",
    )
    add_json(t)
    t.set_defaults(func=run_train)


def run_train(args: argparse.Namespace) -> int:
    from flopwise.hardware import hardware_from_catalog
    from flopwise.plan.first_order import DEFAULT_MFU, first_order_train
    from flopwise.workload.hf import load_model

    model = load_model(args.model)
    hw = hardware_from_catalog(args.accelerator)
    if args.seq_len and args.seq_len > model.max_seq_len:
        from flopwise.errors import FlopwiseError

        raise FlopwiseError(
            f"--seq-len {args.seq_len} exceeds {model.name}'s context of {model.max_seq_len} tokens"
        )
    plan = first_order_train(
        model,
        hw,
        gpus=args.gpus,
        tokens=args.tokens,
        seq_len=args.seq_len,
        mfu=args.mfu or DEFAULT_MFU,
        dtype=args.dtype,
        price_per_gpu_hour=args.price_per_gpu_hour,
    )
    if args.json:
        from flopwise.present.jsonout import emit

        emit(plan.to_dict())
    else:
        from flopwise.present.plan_view import show_first_order

        show_first_order(plan.to_dict())
    return 0
