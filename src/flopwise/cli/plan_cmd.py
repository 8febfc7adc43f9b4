"""`flopwise plan train|infer`: the group; each subcommand lives in its own module."""

from __future__ import annotations

from typing import Any

from flopwise.cli import plan_infer_cmd, plan_train_cmd


def register(sub: Any) -> None:
    p = sub.add_parser(
        "plan",
        help="plan LLM training or inference on an accelerator",
        description="Plan LLM training or inference.",
    )
    psub = p.add_subparsers(dest="plan_cmd", required=True, metavar="WHAT", parser_class=type(p))
    plan_train_cmd.register(psub)
    plan_infer_cmd.register(psub)
