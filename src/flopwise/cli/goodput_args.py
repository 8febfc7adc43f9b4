"""Goodput inputs of `plan train`, `compare train` and `report train`.

The goodput flags (`--failures-per-gpu-day`, `--storage`, `--async-checkpoint`, ...) are job
flags (flopwise/cli/job_flags.py), so job files carry them too; `goodput_inputs_from_args(args)`
builds GoodputInputs from them.
`--measured` and `--db` belong to the commands; when they are set the newest `bench io` run
supplies the per-node checkpoint bandwidth.
"""

from __future__ import annotations

import argparse
from typing import Any


def goodput_inputs_from_args(args: argparse.Namespace) -> Any:
    """GoodputInputs from parsed flags (and `--measured`/`--db` when the command has them)."""
    from dataclasses import replace

    from flopwise.catalog.goodput import failure_causes_from_file
    from flopwise.plan.goodput import GoodputInputs, RestartCosts

    restart = RestartCosts()
    if (d := getattr(args, "failure_detection_s", None)) is not None:
        restart = replace(restart, detection_s=d)
    if (r := getattr(args, "restart_overhead_s", None)) is not None:
        restart = replace(restart, reschedule_s=r)
    data = getattr(args, "failure_data", None)
    profile = getattr(args, "failure_profile", None)
    if data and profile:
        from flopwise.errors import FlopwiseError

        raise FlopwiseError("give --failure-data or --failure-profile, not both")
    causes = failure_causes_from_file(data) if data else ()
    if profile:
        from flopwise.catalog.goodput import failure_causes

        causes = failure_causes(profile)
    return GoodputInputs(
        causes=causes,
        failures_per_gpu_day=getattr(args, "failures_per_gpu_day", None),
        storage=storage_from_args(args),
        async_checkpoint=bool(getattr(args, "async_checkpoint", False)),
        restart=restart,
        checkpoint_interval_s=getattr(args, "checkpoint_interval_s", None),
    )


def storage_from_args(args: argparse.Namespace) -> Any:
    """The checkpoint storage the flags describe, or None for the plan's default."""
    from flopwise.plan.goodput import Storage

    tier_id = getattr(args, "storage", None)
    write = getattr(args, "checkpoint_write_gbps", None)
    read = getattr(args, "checkpoint_read_gbps", None)
    measured = getattr(args, "measured", None)
    if measured is True:  # compare's --measured is a switch: the newest runs
        measured = "latest"
    elif measured is False:
        measured = None
    if write is not None:
        return Storage(
            origin=f"ASSUMED --checkpoint-write-gbps {write:g} (aggregate, given by the user)",
            aggregate_write_gbps=write,
            aggregate_read_gbps=read or write,
        )
    tier = None
    if tier_id:
        from flopwise.catalog.goodput import get_storage_tier

        tier = get_storage_tier(tier_id)
    io = None
    if measured is not None:
        from flopwise.results.measured_io import io_rates, latest_io

        found = latest_io(measured, getattr(args, "db", None))
        io = None if found is None else io_rates(found)
    if io is not None:
        w, r, where = io
        return Storage(
            origin=where + (f", capped by tier {tier.id} ({tier.source})" if tier else ""),
            write_gbps_per_node=w,
            read_gbps_per_node=r,
            aggregate_write_gbps=None if tier is None else tier.aggregate_write_gbps,
            aggregate_read_gbps=read or (None if tier is None else tier.aggregate_read_gbps),
        )
    if tier is not None:
        return Storage(
            origin=f"storage tier {tier.id} ({tier.name}; {tier.source}, as of {tier.as_of})",
            write_gbps_per_node=tier.write_gbps_per_node,
            read_gbps_per_node=tier.read_gbps_per_node,
            aggregate_write_gbps=tier.aggregate_write_gbps,
            aggregate_read_gbps=read or tier.aggregate_read_gbps,
        )
    if read is not None:
        from flopwise.errors import FlopwiseError

        raise FlopwiseError("--checkpoint-read-gbps needs --checkpoint-write-gbps or --storage")
    return None
