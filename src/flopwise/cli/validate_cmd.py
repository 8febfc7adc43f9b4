"""`flopwise validate`: predictions against published runs, with the error of each row."""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

from flopwise.cli._args import add_json

SECTIONS: tuple[str, ...] = ("training", "inference", "memory")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "validate",
        help="compare the planners with published training (and inference) runs",
        description="Predict every published run the package ships with its published layout "
        "and compare like with like; rows that cannot be modelled are listed with why.",
    )
    p.add_argument("--only", choices=SECTIONS, help="run one section")
    add_json(p)
    p.set_defaults(func=run_validate)


def _inference_available() -> bool:
    try:
        return importlib.util.find_spec("flopwise.validate.inference") is not None
    except (ImportError, ValueError):
        return False


def run_validate(args: argparse.Namespace) -> int:
    from flopwise.errors import FlopwiseError

    doc: dict[str, Any] = {}
    if args.only in (None, "training"):
        from flopwise.validate.training import validate_training

        doc["training"] = validate_training().to_dict()
    if args.only in (None, "inference"):
        if _inference_available():
            from importlib import import_module

            mod = import_module("flopwise.validate.inference")
            doc["inference"] = mod.validate_inference().to_dict()
        elif args.only == "inference":
            raise FlopwiseError("inference validation is not available in this version")
    if args.only in (None, "memory"):
        from flopwise.validate.memory import validate_peak_memory
        from flopwise.validate.training import load_training_runs

        doc["memory"] = validate_peak_memory(load_training_runs()).to_dict()
    if args.json:
        from flopwise.present.jsonout import emit

        emit(doc)
    else:
        from flopwise.present.memory_validation_view import show_memory_validation
        from flopwise.present.validate_view import show_validation

        show_validation({k: v for k, v in doc.items() if k != "memory"})
        if "memory" in doc:
            show_memory_validation(doc["memory"])
    return 0
