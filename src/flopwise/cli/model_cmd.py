"""`flopwise model MODEL`: parameters, FLOPs and bytes of a catalog model or a config.json."""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli._args import add_json, positive_int


def register(sub: Any) -> None:
    p = sub.add_parser(
        "model",
        help="parameters, FLOPs per token and bytes of a model",
        description="Account a model: parameters (total/active, per component), training and "
        "inference FLOPs per token, weight/KV-cache/training-state bytes. MODEL is a catalog id, "
        "an alias, a Hugging Face repo name, or a path to a config.json.",
    )
    p.add_argument("model", metavar="MODEL")
    p.add_argument(
        "--seq-len", type=positive_int, help="sequence length (default: min(context, 4096))"
    )
    p.add_argument(
        "--attention",
        choices=("full", "causal"),
        default="full",
        help="attention FLOP convention: full (PaLM/Megatron MFU, default) or causal (halved)",
    )
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flopwise.workload.hf import load_model
    from flopwise.workload.report import describe_model

    doc = describe_model(load_model(args.model), args.seq_len, args.attention).to_dict()
    if args.json:
        from flopwise.present.jsonout import emit

        emit(doc)
    else:
        from flopwise.present.model_view import show_model

        show_model(doc)
    return 0
