"""`flopwise bench io --path DIR`: checkpoint writes/reads and small-file rates."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from flopwise.cli._args import add_bench_outputs, positive_int, typed


def _size(text: str) -> int:
    from flopwise.units import parse_size_bytes

    return int(parse_size_bytes(text, "size"))


def _count(text: str) -> int:
    from flopwise.errors import FlopwiseError

    try:
        value = int(text)
    except ValueError:
        raise FlopwiseError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise FlopwiseError(f"{text!r} must be 0 or more")
    return value


def register(bsub: Any) -> None:
    p = bsub.add_parser(
        "io",
        help="storage: checkpoint write/read GB/s and small-file rates",
        description="Write checkpoint-like files (fsync), read them back bypassing the page "
        "cache where possible, and create/stat/read many small files, all inside a fresh "
        "folder under --path that is removed afterwards (also on Ctrl-C).",
    )
    p.add_argument("--path", required=True, metavar="DIR", help="existing writable folder to test")
    p.add_argument(
        "--size",
        type=typed(_size),
        default="1G",
        metavar="SIZE",
        help="checkpoint bytes, all writers together, e.g. 4G (default 1G)",
    )
    p.add_argument("--writers", type=positive_int, default=1, metavar="N",
                   help="parallel writers (and readers), one file each (default 1)")  # fmt: skip
    p.add_argument("--block-size", type=typed(_size), default="8M", metavar="SIZE",
                   help="bytes per write/read call (default 8M)")  # fmt: skip
    p.add_argument("--files", type=typed(_count), default="2000", metavar="N",
                   help="small files for the data-loader test, 0 to skip (default 2000)")  # fmt: skip
    p.add_argument("--file-size", type=typed(_size), default="16K",
                   metavar="SIZE", help="bytes per small file (default 16K)")  # fmt: skip
    p.add_argument("--model", metavar="MODEL",
                   help="also report seconds to write this model's checkpoint")  # fmt: skip
    p.add_argument("--recipe", default="bf16-adam", metavar="NAME",
                   help="training recipe for the checkpoint size (default bf16-adam)")  # fmt: skip
    add_bench_outputs(p, out=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flopwise.bench import io
    from flopwise.present import cluster_view

    cfg = io.IoConfig(
        path=args.path,
        size_bytes=args.size,
        writers=args.writers,
        block_bytes=args.block_size,
        small_files=args.files,
        small_file_bytes=args.file_size,
    )
    if args.model:  # resolve the model before spending time measuring
        from flopwise.workload import load_model
        from flopwise.workload.memory_bytes import get_recipe

        load_model(args.model)
        get_recipe(args.recipe)
    from flopwise.cli._signals import exit_code
    from flopwise.errors import FlopwiseError
    from flopwise.results.safe_save import keep, preflight

    preflight(args.db)  # an unusable --db fails now, not after measuring
    result = io.run_io(cfg)
    if args.model:
        cost = io.checkpoint_cost(args.model, args.recipe, result.write_gbps, result.read_gbps)
        result = dataclasses.replace(result, checkpoint=cost)
    doc = result.to_dict()
    measured = result
    outcome = keep("io", doc, lambda: io.store_result(measured, args.db))
    result = dataclasses.replace(result, result_id=outcome.result_id)
    cluster_view.io_report(result, as_json=args.json)
    if outcome.problem is not None:
        raise FlopwiseError(outcome.problem)
    return exit_code(result.status)
