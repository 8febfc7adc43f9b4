"""What every stored benchmark command does around its measurement: check --db/--out before
measuring, show progress, keep the run (store and --out, never losing it), print it, exit."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from flopwise.bench.device import DeviceInfo


def keep_and_show(
    kind: str,
    result: Any,
    info: DeviceInfo,
    args: argparse.Namespace,
    show: Callable[[dict[str, Any], int | None], None],
) -> dict[str, Any]:
    """Store the run and write --out (results.safe_save: a failure goes to a fallback file),
    print it as JSON or through `show`, then raise the store's problem if there was one."""
    from flopwise.bench.provenance import keep_run
    from flopwise.errors import FlopwiseError
    from flopwise.present.jsonout import dumps, emit

    doc, outcome = keep_run(kind, result, info, args.db, args.out, dumps)
    if args.json:
        emit(doc)
    else:
        show(doc, outcome.result_id)
    if outcome.problem is not None:
        raise FlopwiseError(outcome.problem)
    return doc


def run_stored(
    kind: str,
    what: str,
    args: argparse.Namespace,
    device: str,
    measure: Callable[[Callable[[int, int], None], DeviceInfo], Any],
    show: Callable[[dict[str, Any], int | None], None],
) -> int:
    """Run one round-based benchmark on `device` with a progress bar (Ctrl-C and SIGTERM keep
    what was measured) and keep it; the exit code follows the run's status."""
    from flopwise.bench.device import resolve_device
    from flopwise.cli._signals import exit_code, terminate_as_interrupt
    from flopwise.present import bench_view
    from flopwise.results.safe_save import preflight

    preflight(args.db, args.out)  # an unusable --db or --out fails now, not after measuring
    info = resolve_device(device)
    with terminate_as_interrupt(), bench_view.rounds_progress(what) as on_round:
        result = measure(on_round, info)
    keep_and_show(kind, result, info, args, show)
    return int(exit_code(result.status))
