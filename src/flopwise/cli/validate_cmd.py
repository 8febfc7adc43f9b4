"""`flopwise validate`: predictions against published runs, with the error of each row."""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

from flopwise.cli._args import add_json

SECTIONS: tuple[str, ...] = (
    "training",
    "training-unseen",
    "inference",
    "online",
    "matmul",
    "attention",
    "goodput",
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "validate",
        help="compare the planners with published training (and inference) runs",
        description="Predict every published run the package ships from the plan command a "
        "user would type (its published layout and framework) and compare like with like. "
        "Out-of-sample errors lead: the fitted constant is refitted without each row's source "
        "family; in-sample errors are shown beside them, labelled. Rows that cannot be posed "
        "are listed with why (--json).",
    )
    p.add_argument("--only", choices=SECTIONS, help="run one section")
    p.add_argument("--rows", action="store_true", help="print every row's error")
    add_json(p)
    p.set_defaults(func=run_validate)


def _inference_available() -> bool:
    try:
        return importlib.util.find_spec("flopwise.validate.inference") is not None
    except (ImportError, ValueError):
        return False


def run_validate(args: argparse.Namespace) -> int:
    from flopwise.errors import FlopwiseError
    from flopwise.present.validate_view import section_status

    doc: dict[str, Any] = {}
    spin = not args.json
    if args.only in (None, "training"):
        from flopwise.validate.training import validate_training

        with section_status("training", spin):
            doc["training"] = validate_training().to_dict()
    if args.only in (None, "training-unseen"):
        from flopwise.validate.unseen_training import validate_unseen_training

        with section_status("training runs nothing was fitted to", spin):
            doc["training_unseen"] = validate_unseen_training().to_dict()
    if args.only in (None, "inference"):
        if _inference_available():
            from importlib import import_module

            mod = import_module("flopwise.validate.inference")
            with section_status("inference", spin):
                doc["inference"] = mod.validate_inference().to_dict()
        elif args.only == "inference":
            raise FlopwiseError("inference validation is not available in this version")
    if args.only in (None, "online"):
        from flopwise.validate.online import validate_online

        with section_status("online serving", spin):
            doc["online"] = validate_online().to_dict()
    if args.only in (None, "matmul"):
        from flopwise.validate.matmul import validate_matmul

        with section_status("GEMM rates", spin):
            doc["matmul"] = validate_matmul().to_dict()
    if args.only in (None, "attention"):
        from flopwise.validate.attention import validate_attention

        with section_status("attention kernels", spin):
            doc["attention"] = validate_attention().to_dict()
    if args.only in (None, "goodput"):
        from flopwise.validate.goodput import validate_goodput

        with section_status("goodput", spin):
            doc["goodput"] = validate_goodput().to_dict()
    from flopwise.validate.summary import summary_lines

    # every section's out-of-sample figure first: where the model does worst is not left to
    # the reader who stops at the first table
    doc = {"summary": [line.to_dict() for line in summary_lines(doc)], **doc}
    if args.json:
        from flopwise.present.jsonout import emit

        emit(doc)
    else:
        from flopwise.present.validate_view import show_validation

        show_validation(doc, rows=args.rows)
    return 0
