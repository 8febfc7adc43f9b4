"""The latency/throughput curve over batch sizes (static batching at the job's lengths)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from flopwise.hardware import Hardware
from flopwise.plan.infer.context import make_context
from flopwise.plan.infer.job import InferJob
from flopwise.plan.infer.planner import plan_static, static_memory
from flopwise.plan.infer.uncertainty import interval_fields, plan_intervals
from flopwise.plan.intervals import Interval
from flopwise.workload.spec import ModelSpec

DEFAULT_POINTS = 64


@dataclass(frozen=True, slots=True)
class SweepPoint:
    batch: int
    ttft_s: float
    tpot_s: float
    e2e_latency_s: float
    output_tokens_per_s: float
    tokens_per_s_per_user: float
    memory_per_gpu_gib: float
    fits: bool | None
    mbu: float | None
    mfu: float | None
    cost_per_million_output_tokens: float | None
    intervals: dict[str, Interval] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        ranges = interval_fields(
            self.intervals,
            {
                "ttft_ms": self.ttft_s * 1e3,
                "tpot_ms": self.tpot_s * 1e3,
                "output_tokens_per_s": self.output_tokens_per_s,
            },
        )
        ranges.pop("intervals")
        return {
            **ranges,
            "batch": self.batch,
            "ttft_ms": self.ttft_s * 1e3,
            "tpot_ms": self.tpot_s * 1e3,
            "e2e_latency_s": self.e2e_latency_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "tokens_per_s_per_user": self.tokens_per_s_per_user,
            "memory_per_gpu_gib": self.memory_per_gpu_gib,
            "fits": self.fits,
            "mbu": self.mbu,
            "mfu": self.mfu,
            "cost_per_million_output_tokens": self.cost_per_million_output_tokens,
        }


def sweep_sizes(max_batch: int, points: int = DEFAULT_POINTS) -> list[int]:
    """`points` distinct batch sizes from 1 to max_batch (all of them if fewer), log-spaced."""
    top = max(1, max_batch)
    if top <= points:
        return list(range(1, top + 1))
    n = points
    while True:
        sizes = sorted({round(top ** (i / (n - 1))) for i in range(n)})
        if len(sizes) >= points:
            break
        n += 1
    # drop the surplus evenly, keeping 1 and the top
    keep = {round(i * (len(sizes) - 1) / (points - 1)) for i in range(points)}
    return [sizes[i] for i in sorted(keep)]


def sweep_batches(
    model: ModelSpec,
    hardware: Hardware,
    job: InferJob,
    sizes: Sequence[int] | None = None,
    points: int = DEFAULT_POINTS,
) -> list[SweepPoint]:
    """Plan each batch size; by default `points` sizes up to the largest batch that fits."""
    ctx = make_context(model, hardware, replace(job, batch=1))
    if sizes is None:
        limit = static_memory(ctx, 1).max_batch
        sizes = sweep_sizes(limit if limit else 256, points)
    ranges = plan_intervals(hardware.id, ctx.engine.name, model.is_moe)
    out: list[SweepPoint] = []
    for b in sizes:
        plan = plan_static(replace(ctx, job=replace(job, batch=b)), b)
        out.append(
            SweepPoint(
                batch=b,
                ttft_s=plan.ttft_s,
                tpot_s=plan.tpot_s,
                e2e_latency_s=plan.e2e_latency_s,
                output_tokens_per_s=plan.output_tokens_per_s,
                tokens_per_s_per_user=plan.tokens_per_s_per_user,
                memory_per_gpu_gib=plan.memory.total_bytes / 2**30,
                fits=plan.fits,
                mbu=plan.mbu,
                mfu=plan.mfu,
                cost_per_million_output_tokens=plan.cost_per_million_output_tokens,
                intervals=ranges,
            )
        )
    return out
