"""`flopwise plan infer` (the inference planner fills this in)."""

from __future__ import annotations

import argparse
from typing import Any


def register(psub: Any) -> None:
    p = psub.add_parser(
        "infer",
        help="inference latency, throughput, memory and cost",
        description="Plan LLM inference (prefill and decode).",
    )
    p.add_argument("model", metavar="MODEL")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flopwise.errors import FlopwiseError

    raise FlopwiseError("plan infer is not available in this build yet")
