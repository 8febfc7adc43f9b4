"""``--request-rate R``: online serving with requests arriving at R per second (an open loop).

``vllm bench serve --request-rate R`` (and SGLang's ``bench_serving``) send requests at Poisson
arrival times whatever the server does; vLLM's CI serving dashboards run it at fixed rates. In
the steady state each replica receives R / replicas requests per second, and by Little's law
runs B = (R / replicas) x E2E sequences on average, where E2E is a request's latency at that B
(the step with B decoding and their prompts' prefill, and a prompt's passes: ``online.py``). The
planner solves that fixed point from below. A prompt waits for the prefill behind the prompts
that arrived before it: with Poisson arrivals that is exactly an M/D/1 queue (its utilisation
is the rate times one prompt's prefill). Output throughput is R x output_len: in a steady state
every request that arrives is served.

A rate the deployment cannot sustain (B would exceed what fits and the engine allows, or the
prefill alone would be busy all the time) has no steady state: the queue grows for as long as
the benchmark runs. The planner finds the least B with B = rate x E2E(B) (a scan for the first
sign change, then bisection) and, where there is none, says so in one line with the highest rate it sustains
(the closed loop at its capacity, ``online.py``) instead of a latency it cannot know.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from flopwise.errors import FlopwiseError
from flopwise.plan.infer.batching import (
    continuous_memory,
    continuous_plan,
    kv_tokens_held,
)
from flopwise.plan.infer.context import Context
from flopwise.plan.infer.online import (
    SteadyService,
    md1_wait_s,
    online_context,
    poll_wait_s,
    steady_service,
)
from flopwise.plan.infer.result import InferPlan

if TYPE_CHECKING:
    from flopwise.hardware import Hardware
    from flopwise.plan.infer.job import InferJob
    from flopwise.plan.infer.speculative import DraftConfig
    from flopwise.workload.spec import ModelSpec

#: Points of the scan for the first sign change of rate x E2E(B) - B, and the relative width
#: at which its bisection stops.
SCAN_POINTS = 64
TOLERANCE = 1e-9


class OverloadError(FlopwiseError):
    """A request rate the deployment cannot sustain; ``max_rate_per_s`` is the one it does."""

    def __init__(self, message: str, max_rate_per_s: float) -> None:
        super().__init__(message)
        self.max_rate_per_s = max_rate_per_s


@dataclass(frozen=True, slots=True)
class ArrivalLoad:
    """What Poisson arrivals at a rate settle to on one replica."""

    rate_per_s: float  # requests per second arriving at the deployment
    replica_rate_per_s: float  # ... at each replica
    mean_running: float  # sequences running on average (Little's law)
    capacity: int  # the most the replica runs at once
    max_rate_per_s: float  # the deployment's sustainable rate (its closed loop at capacity)
    prefill_chunks: int
    prefill_wait_s: float  # behind other prompts' prefill (M/D/1)
    prefill_busy: float  # share of the time the replica spends prefilling
    poll_wait_s: float = 0.0  # for the scheduler's next look at new requests

    def to_dict(self) -> dict[str, Any]:
        return {
            "rate_per_s": self.rate_per_s,
            "replica_rate_per_s": self.replica_rate_per_s,
            "mean_running": self.mean_running,
            "capacity": self.capacity,
            "max_rate_per_s": self.max_rate_per_s,
            "prefill_chunks": self.prefill_chunks,
            "prefill_wait_ms": self.prefill_wait_s * 1e3,
            "poll_wait_ms": self.poll_wait_s * 1e3,
            "prefill_busy": self.prefill_busy,
        }


def _least_fixed_point(
    g: Callable[[float], float], capacity: int, overloaded: Callable[[], FlopwiseError]
) -> float:
    """The least B in (0, capacity] with g(B) = B (g increasing: requests running at B), found
    by scanning for the first B with g(B) <= B and bisecting; none means an overload."""
    lo = g(0.0)
    if lo <= 0:
        return 0.0
    top = float(capacity)
    if lo > top:
        raise overloaded()
    grid = [lo * (top / lo) ** (i / (SCAN_POINTS - 1)) for i in range(SCAN_POINTS)]
    prev = 0.0
    for b in grid:
        if g(b) <= b:
            hi = b
            while hi - prev > TOLERANCE * hi:
                mid = 0.5 * (prev + hi)
                if g(mid) <= mid:
                    hi = mid
                else:
                    prev = mid
            return hi
        prev = b
    raise overloaded()


def _max_rate_per_s(ctx: Context, capacity: int) -> float:
    """Requests per second one replica completes with `capacity` running (its closed loop)."""
    from flopwise.plan.infer.online import plan_online

    full = plan_online(replace(ctx, job=replace(ctx.job, replicas=1)), capacity)
    wait = full.extras["online"]["queue_wait_ms"] / 1e3
    return full.batch / (full.e2e_latency_s - wait)


def plan_request_rate(ctx: Context, rate_per_s: float) -> InferPlan:
    """Steady state of Poisson arrivals at `rate_per_s` over the deployment (module docstring)."""
    if not rate_per_s > 0 or not math.isfinite(rate_per_s):
        raise FlopwiseError(f"request rate must be a positive number, got {rate_per_s!r}")
    ctx, build, capacity = online_context(ctx)
    job = ctx.job
    lam = rate_per_s / job.replicas

    def overloaded() -> FlopwiseError:
        top = _max_rate_per_s(ctx, capacity) * job.replicas
        return OverloadError(
            f"{rate_per_s:g} requests/s is more than {job.gpus} x {ctx.hw.id} serve at "
            f"{job.input_len} in / {job.output_len} out: at most {top:.3g} requests/s "
            f"({capacity:,} running per replica); lower --request-rate or add GPUs",
            top,
        )

    def latency(running: float) -> tuple[float, SteadyService, float, float, float]:
        # below one request at a time the steps are a lone request's
        service = steady_service(ctx, max(running, 1.0))
        busy = lam * service.prefill_s
        if busy >= 1:
            raise overloaded()
        wait = md1_wait_s(busy, service.prefill_s)
        # an arrival finds others decoding unless none is in the system: a Poisson count of
        # mean `running` (what arrivals see is the time average) is 0 with e^-running
        poll = poll_wait_s(ctx, service.step.time_s, 1.0 - math.exp(-running))
        e2e = service.first_token_s + poll + wait + (job.output_len - 1) * service.step.time_s
        return e2e, service, wait, busy, poll

    running = _least_fixed_point(lambda b: lam * latency(b)[0], capacity, overloaded)
    e2e, service, wait, busy, poll = latency(running)
    step = service.step
    load = ArrivalLoad(
        rate_per_s=rate_per_s,
        replica_rate_per_s=lam,
        mean_running=running,
        capacity=capacity,
        max_rate_per_s=_max_rate_per_s(ctx, capacity) * job.replicas,
        prefill_chunks=service.chunks,
        prefill_wait_s=wait,
        prefill_busy=busy,
        poll_wait_s=poll,
    )
    return continuous_plan(
        ctx,
        build,
        mode="rate",
        batch=max(1, round(running)),
        ttft_s=service.first_token_s + poll + wait,
        tpot_s=step.time_s,
        e2e_latency_s=e2e,
        output_tokens_per_s=rate_per_s * job.output_len,
        memory=replace(continuous_memory(ctx, max(1, math.ceil(running))), max_batch=capacity),
        decode=step,
        running=max(running, 1.0),
        request_s=e2e,
        notes=(
            f"online serving: Poisson arrivals at {rate_per_s:g} requests/s"
            + (f" ({lam:.3g} per replica)" if job.replicas > 1 else "")
            + f"; {running:,.1f} running on average (Little's law), each holding "
            f"{kv_tokens_held(ctx):,.0f} tokens of KV; prompts wait {wait * 1e3:,.0f} ms "
            f"behind each other's prefill (M/D/1, prefill busy {busy:.0%})"
            + (
                f" and {poll * 1e3:,.1f} ms for the scheduler's next look at new requests "
                f"(every {job.scheduler_poll_steps} decode steps)"
                if poll > 0
                else ""
            )
            + f"; sustainable up to {load.max_rate_per_s:.3g} requests/s",
        ),
        extras={"arrivals": load.to_dict()},
    )


@dataclass(frozen=True, slots=True)
class RateSweep:
    """The plans at the sustained rates of a sweep, and the first rate refused (if any)."""

    plans: tuple[InferPlan, ...]
    refused_rate_per_s: float | None = None
    max_rate_per_s: float | None = None
    reason: str = ""


def plan_rate_sweep(
    model: ModelSpec,
    hardware: Hardware,
    job: InferJob,
    rates: Sequence[float],
    draft: DraftConfig | None = None,
) -> RateSweep:
    """Plans at each of `rates` (sorted) until the first rate the deployment cannot sustain;
    `draft` as for ``plan_inference`` (which refuses it for the online modes)."""
    from flopwise.plan.infer.planner import plan_inference

    if not rates:
        raise FlopwiseError("a request-rate sweep needs at least one rate")
    plans: list[InferPlan] = []
    for rate in sorted(rates):
        try:
            paced = replace(job, request_rate=float(rate))
            plans.append(plan_inference(model, hardware, paced, draft=draft))
        except OverloadError as exc:
            return RateSweep(tuple(plans), float(rate), exc.max_rate_per_s, str(exc))
    return RateSweep(tuple(plans))
