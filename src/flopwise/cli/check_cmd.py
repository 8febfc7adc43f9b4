"""`flopwise check`: can every rank of this job reach every other? (rank 0 reports)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from flopwise.cli._args import add_json, positive_float


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="connectivity check: every rank reports host, device and a tiny all_reduce",
        description="Run under torchrun or srun (or alone for one process): every rank reports "
        "its host, rank, local device and a tiny all_reduce result; a rank that does not "
        "answer within --timeout is named. Exit 0 when all is well, 1 otherwise.",
    )
    p.add_argument("--backend", default="auto", help="auto (nccl on CUDA, gloo on CPU) or a name")
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=60.0,
        metavar="S",
        help="seconds to wait for every rank (default 60)",
    )
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flopwise.bench import dist
    from flopwise.bench.check import run_check
    from flopwise.cli._dist_fail import report_early_failure
    from flopwise.errors import FlopwiseError
    from flopwise.present import cluster_view

    dist.resolve_backend(args.backend)  # bad flags and environments stay exit-2 errors
    dist.env_from()
    try:
        s = dist.start(args.backend, args.timeout)
    except FlopwiseError as exc:  # no process group: still one JSON document from rank 0
        return report_early_failure(exc, args.backend, as_json=args.json)
    try:
        result = run_check(s)
        if s.rank == 0:
            cluster_view.check_report(result, as_json=args.json)
        elif result.problem:
            sys.stderr.write(f"flopwise: check failed: {result.problem}\n")
    finally:
        dist.stop()
    return 0 if result.ok else 1
