"""Goodput: what failures, checkpoints and restarts cost a finished training plan.

Layered on a TrainPlan (its public ``to_dict()``), so the step-time model is untouched:

- Interruptions: each cause of the failure profile (catalog failures.csv, or the user's own log)
  is a rate per GPU-day or per node-day, scaled by the job's GPUs and nodes. Unexpected ones lose
  the work since the last complete checkpoint and wait for detection; planned ones (maintenance)
  checkpoint first and only pay the restart.
- Checkpoint: the training state the plan holds (weights, fp32 master copy and optimizer moments
  of its recipe; gradients are not saved), deduplicated across data-parallel replicas as PyTorch
  DCP and Megatron's distributed checkpoint do, so the job writes params x bytes/param once;
  every rank writes its shard, so the aggregate write rate is nodes x per-node GB/s capped by
  the file system. On restart every rank reads its whole state back (replicas included). Synchronous saves stall for the whole write; asynchronous ones (PyTorch DCP
  ``async_save``, Megatron-Core ``--async-save``) stall only while each GPU copies its own
  state to host memory over its host link, and the drain to storage overlaps training.
- Interval: Young (1974) / Daly (2006): tau = sqrt(2 x stall x MTBF of unexpected interruptions),
  no shorter than one step nor (async) than the drain of the previous checkpoint.
- Goodput = (1 - interruption overhead per second) / (1 + stall / tau); effective days, GPU-hours
  and cost are the ideal ones divided by it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from flopwise.catalog.goodput import (
    DEFAULT_FAILURE_PROFILE,
    FailureCause,
    failure_causes,
    get_storage_tier,
    host_link_gbps,
)
from flopwise.errors import FlopwiseError
from flopwise.units import GB, GIB, SECONDS_PER_DAY, SECONDS_PER_HOUR

from .goodput_constants import (
    DEFAULT_STORAGE_TIER,
    FAILURE_DETECTION_S,
    NEAR_ONE,
    RESCHEDULE_STARTUP_S,
    WARMUP_STEPS,
)


@dataclass(frozen=True, slots=True)
class Storage:
    """Checkpoint storage bandwidth (GB/s); None = unknown. `origin` says where it came from."""

    origin: str
    write_gbps_per_node: float | None = None
    read_gbps_per_node: float | None = None
    aggregate_write_gbps: float | None = None  # the file system's cap for the whole job
    aggregate_read_gbps: float | None = None

    def __post_init__(self) -> None:
        for name in (
            "write_gbps_per_node",
            "read_gbps_per_node",
            "aggregate_write_gbps",
            "aggregate_read_gbps",
        ):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise FlopwiseError(f"storage {name} must be positive, got {v}")

    def rate(self, nodes: int, write: bool) -> float | None:
        """Aggregate GB/s for a job on `nodes` nodes: nodes x per node, capped by the FS."""
        per_node = self.write_gbps_per_node if write else self.read_gbps_per_node
        cap = self.aggregate_write_gbps if write else self.aggregate_read_gbps
        known = [v for v in (None if per_node is None else per_node * nodes, cap) if v]
        return min(known) if known else None


@dataclass(frozen=True, slots=True)
class RestartCosts:
    """What each restart costs besides loading the checkpoint (goodput_constants)."""

    detection_s: float = FAILURE_DETECTION_S
    reschedule_s: float = RESCHEDULE_STARTUP_S
    warmup_steps: float = WARMUP_STEPS

    def __post_init__(self) -> None:
        for name in ("detection_s", "reschedule_s", "warmup_steps"):
            if getattr(self, name) < 0:
                raise FlopwiseError(f"{name} must not be negative, got {getattr(self, name)}")


@dataclass(frozen=True, kw_only=True, slots=True)
class GoodputInputs:
    """Everything goodput needs beyond the plan. Defaults: the catalog's failure profile and
    storage tier, synchronous checkpoints, the named restart constants."""

    causes: tuple[FailureCause, ...] = ()  # empty: the catalog's default profile
    failures_per_gpu_day: float | None = None  # replaces the causes: all unexpected, per GPU
    storage: Storage | None = None  # None: DEFAULT_STORAGE_TIER, capped by the node's NICs
    async_checkpoint: bool = False
    host_copy_gbps: float | None = None  # device-to-host GB/s; None: catalog host_links.csv
    restart: RestartCosts = field(default_factory=RestartCosts)
    checkpoint_interval_s: float | None = None  # None: Young/Daly optimum

    def __post_init__(self) -> None:
        f = self.failures_per_gpu_day
        if f is not None and (f < 0 or f != f or f == math.inf):
            raise FlopwiseError(f"--failures-per-gpu-day must be >= 0, got {f}")
        for name in ("host_copy_gbps", "checkpoint_interval_s"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise FlopwiseError(f"{name} must be positive, got {v}")


@dataclass(frozen=True, slots=True)
class Goodput:
    """The goodput of one plan. Times in seconds, bytes in bytes; None = unknown."""

    interruptions_per_day: float
    unexpected_per_day: float
    job_mtbf_h: float | None
    checkpoint_bytes: float
    checkpoint_bytes_per_gpu: float
    checkpoint_write_s: float | None
    checkpoint_read_s: float | None
    snapshot_s: float | None
    checkpoint_stall_s: float | None
    checkpoint_interval_s: float | None
    restart_s: float | None
    lost_work_per_failure_s: float | None
    goodput_fraction: float | None
    ideal_train_days: float | None
    ideal_gpu_hours: float | None
    ideal_cost_usd: float | None
    async_checkpoint: bool
    failure_source: str
    storage_source: str
    host_link_source: str | None
    causes: tuple[dict[str, Any], ...]
    notes: tuple[str, ...] = ()

    def _effective(self, ideal: float | None) -> float | None:
        g = self.goodput_fraction
        return None if ideal is None or not g else ideal / g

    @property
    def effective_train_days(self) -> float | None:
        return self._effective(self.ideal_train_days)

    @property
    def effective_gpu_hours(self) -> float | None:
        return self._effective(self.ideal_gpu_hours)

    @property
    def effective_cost_usd(self) -> float | None:
        return self._effective(self.ideal_cost_usd)

    def to_dict(self) -> dict[str, Any]:
        return {
            "interruptions_per_day": self.interruptions_per_day,
            "job_mtbf_h": self.job_mtbf_h,
            "checkpoint_bytes": self.checkpoint_bytes,
            "checkpoint_write_s": self.checkpoint_write_s,
            "checkpoint_stall_s": self.checkpoint_stall_s,
            "checkpoint_interval_s": self.checkpoint_interval_s,
            "restart_s": self.restart_s,
            "lost_work_per_failure_s": self.lost_work_per_failure_s,
            "goodput_fraction": self.goodput_fraction,
            "effective_train_days": self.effective_train_days,
            "effective_gpu_hours": self.effective_gpu_hours,
            "effective_cost_usd": self.effective_cost_usd,
            "detail": {
                "unexpected_per_day": self.unexpected_per_day,
                "checkpoint_bytes_per_gpu": self.checkpoint_bytes_per_gpu,
                "checkpoint_read_s": self.checkpoint_read_s,
                "snapshot_s": self.snapshot_s,
                "async_checkpoint": self.async_checkpoint,
                "ideal_train_days": self.ideal_train_days,
                "ideal_gpu_hours": self.ideal_gpu_hours,
                "ideal_cost_usd": self.ideal_cost_usd,
                "failure_source": self.failure_source,
                "storage_source": self.storage_source,
                "host_link_source": self.host_link_source,
                "causes": [dict(c) for c in self.causes],
            },
            "notes": list(self.notes),
        }


def plan_goodput(plan: Any, inputs: GoodputInputs | None = None) -> Goodput:
    """Goodput of a finished TrainPlan (anything with the TrainPlan ``to_dict()`` form)."""
    return goodput_from_plan_dict(plan.to_dict(), inputs or GoodputInputs())


def _rates(inputs: GoodputInputs, gpus: int, nodes: int) -> tuple[float, float, str, list[Any]]:
    """(unexpected per day, planned per day, source text, per-cause rows)."""
    if inputs.failures_per_gpu_day is not None:
        f = inputs.failures_per_gpu_day
        return f * gpus, 0.0, f"--failures-per-gpu-day {f:g} (given by the user)", []
    causes = inputs.causes or failure_causes(DEFAULT_FAILURE_PROFILE)
    rows = []
    unexpected = planned = 0.0
    for c in causes:
        per_day = c.per_day(gpus, nodes)
        if c.kind == "planned":
            planned += per_day
        else:
            unexpected += per_day
        rows.append({**c.to_dict(), "per_day": per_day})
    profiles = sorted({c.profile for c in causes})
    sources = sorted({c.source for c in causes})
    return unexpected, planned, f"profile {', '.join(profiles)} ({'; '.join(sources)})", rows


def unexpected_per_day(gpus: int, gpus_per_node: int, inputs: GoodputInputs) -> tuple[float, float]:
    """(all interruptions per day, the unexpected ones) for a job of `gpus` GPUs."""
    unexpected, planned, _, _ = _rates(inputs, gpus, -(-gpus // gpus_per_node))
    return unexpected + planned, unexpected


def _default_storage(system_id: str | None, gpus_per_node: int) -> Storage:
    tier = get_storage_tier(DEFAULT_STORAGE_TIER)
    per_node: float | None = tier.write_gbps_per_node
    origin = (
        f"ASSUMED storage tier {tier.id} ({tier.name}; {tier.source}), no storage known for "
        "this node type: give --checkpoint-write-gbps, --storage or --measured"
    )
    if per_node is None and system_id:
        from flopwise.catalog.systems import get_system

        node = get_system(system_id)
        per_node = node.nics_per_node * node.nic_gbit_s / 8.0 or None
        if per_node is not None:
            origin += f"; per node at most its scale-out NICs ({per_node:g} GB/s, {node.id})"
    return Storage(
        origin=origin,
        write_gbps_per_node=per_node,
        read_gbps_per_node=tier.read_gbps_per_node or per_node,
        aggregate_write_gbps=tier.aggregate_write_gbps,
        aggregate_read_gbps=tier.aggregate_read_gbps,
    )


def _state_bytes(doc: dict[str, Any]) -> tuple[float, float | None]:
    """(checkpoint bytes for the whole job, the busiest GPU's own checkpointed state)."""
    from flopwise.plan.train.recipes import resolve_recipe

    recipe = doc.get("recipe")
    if not recipe:
        raise FlopwiseError("goodput needs the plan's training recipe (a model plan, not --mfu)")
    r = resolve_recipe(str(recipe))
    optimizer = r.optimizer
    opt = doc.get("optimizer") or {}
    if opt.get("name") == "muon":
        from flopwise.plan.train.muon import muon_optimizer_bytes

        optimizer = muon_optimizer_bytes(optimizer, float(opt["managed_params_share"]))
    total = float(doc["params"]) * (r.weights + r.master + optimizer)
    mem = doc.get("memory_breakdown") or {}
    keys = ("weights_gib", "master_weights_gib", "optimizer_gib")
    per_gpu = sum(float(mem[k]) for k in keys) * GIB if all(k in mem for k in keys) else None
    return total, per_gpu


def goodput_from_plan_dict(doc: dict[str, Any], inputs: GoodputInputs) -> Goodput:
    """Goodput from a training plan's JSON form (TrainPlan.to_dict())."""
    gpus = int(doc["gpus"])
    gpn = int(doc.get("gpus_per_node") or 1)
    nodes = -(-gpus // gpn)
    step_s = doc.get("step_time_s")
    train_s = doc.get("train_s")
    unexpected_d, planned_d, failure_source, cause_rows = _rates(inputs, gpus, nodes)
    per_day = unexpected_d + planned_d
    lam_u, lam_p = unexpected_d / SECONDS_PER_DAY, planned_d / SECONDS_PER_DAY
    notes: list[str] = []

    ckpt_bytes, per_gpu = _state_bytes(doc)
    storage = inputs.storage or _default_storage(doc.get("system"), gpn)
    w_gbps, r_gbps = storage.rate(nodes, True), storage.rate(nodes, False)
    if r_gbps is None and w_gbps is not None:
        r_gbps = w_gbps
        notes.append("read bandwidth unknown: checkpoint load assumed as fast as the write")
    write_s = None if w_gbps is None else ckpt_bytes / (w_gbps * GB)
    # on restart every rank loads its own state, replicas included (no broadcast assumed)
    read_bytes = ckpt_bytes if per_gpu is None else max(per_gpu * gpus, ckpt_bytes)
    read_s = None if r_gbps is None else read_bytes / (r_gbps * GB)

    link = inputs.host_copy_gbps
    link_source = None if link is None else f"--host-copy-gbps {link:g} (given by the user)"
    if link is None and (found := host_link_gbps(str(doc.get("accelerator", "")))) is not None:
        link, link_source = found
    snapshot_bytes = per_gpu if per_gpu is not None else ckpt_bytes / gpus
    snapshot_s = None if link is None else snapshot_bytes / (link * GB)
    if inputs.async_checkpoint:
        stall_s = snapshot_s
        if stall_s is None:
            notes.append("async checkpoint: no device-to-host bandwidth for this accelerator")
    else:
        stall_s = write_s

    interval = inputs.checkpoint_interval_s
    if interval is None and stall_s is not None:
        if lam_u > 0:
            interval = math.sqrt(2.0 * stall_s / lam_u)
        elif train_s is not None:
            interval = float(train_s)
        if interval is not None:
            floor = max(float(step_s or 0.0), write_s or 0.0 if inputs.async_checkpoint else 0.0)
            interval = max(interval, floor)
            if train_s is not None:  # no run checkpoints less than once
                interval = min(interval, max(float(train_s), floor))
    lost = None
    if interval is not None:
        lost = interval / 2.0 + ((write_s or 0.0) if inputs.async_checkpoint else 0.0)
    rc = inputs.restart
    warm = rc.warmup_steps * float(step_s or 0.0)
    restart_s = None if read_s is None else rc.detection_s + rc.reschedule_s + read_s + warm
    planned_restart_s = None if read_s is None else rc.reschedule_s + read_s + warm

    fraction: float | None = None
    if (
        stall_s is not None
        and interval
        and lost is not None
        and restart_s is not None
        and planned_restart_s is not None
    ):
        overhead = lam_u * (lost + restart_s) + lam_p * planned_restart_s
        if overhead >= 1.0:
            fraction = 0.0
            notes.append(
                "the job fails faster than it can restart and redo lost work: it never finishes"
            )
        else:
            fraction = (1.0 - overhead) / (1.0 + stall_s / interval)
    if w_gbps is None:
        notes.append("storage bandwidth unknown: give --checkpoint-write-gbps or --measured")
    ideal_days = None if train_s is None else float(train_s) / SECONDS_PER_DAY
    if fraction is not None and fraction >= NEAR_ONE and ideal_days is not None:
        expected = per_day * ideal_days / fraction
        notes.append(
            f"goodput near 1: about {expected:.2g} interruptions expected over the whole run "
            f"({gpus} GPUs on {nodes} node{'s' if nodes > 1 else ''})"
        )
    return Goodput(
        interruptions_per_day=per_day,
        unexpected_per_day=unexpected_d,
        job_mtbf_h=None if per_day <= 0 else 24.0 / per_day,
        checkpoint_bytes=ckpt_bytes,
        checkpoint_bytes_per_gpu=snapshot_bytes,
        checkpoint_write_s=write_s,
        checkpoint_read_s=read_s,
        snapshot_s=snapshot_s,
        checkpoint_stall_s=stall_s,
        checkpoint_interval_s=interval,
        restart_s=restart_s,
        lost_work_per_failure_s=lost,
        goodput_fraction=fraction,
        ideal_train_days=ideal_days,
        ideal_gpu_hours=doc.get("gpu_hours"),
        ideal_cost_usd=doc.get("cost_usd"),
        async_checkpoint=inputs.async_checkpoint,
        failure_source=failure_source,
        storage_source=storage.origin,
        host_link_source=link_source,
        causes=tuple(cause_rows),
        notes=tuple(notes),
    )


def hours(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / SECONDS_PER_HOUR
