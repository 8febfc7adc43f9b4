"""``--concurrency N``: online serving with N requests in flight (a closed loop).

Benchmarks of a served endpoint keep N requests outstanding and send a client's next request
as soon as its previous one finishes: NVIDIA AIPerf / GenAI-Perf ``--concurrency``, ``vllm
bench serve --max-concurrency``, SGLang's ``bench_serving --max-concurrency``. In the steady
state the engine runs B = min(N, what fits and the engine allows) sequences by continuous
batching (``batching.py``); B / (passes + output_len) requests join per step, each prompt
prefilled in a pass (or passes of the engine's token budget) beside the other sequences'
decode tokens, every other step decode only (``steady_service``). Per request:

- time per output token (the benchmarks' inter-token latency): the mean step, since a request's
  tokens wait through the steps that carry other requests' prompts;
- time to first token: its prompt's passes, after half a pass in flight on average (none with
  one request in flight), plus the wait for the scheduler's next look at new requests when it
  looks only every few decode steps (``poll_wait_s``), plus the wait behind the prompts that
  arrived before it (an M/D/1 queue whose service time is one prompt's prefill), plus, when
  N > B, the wait in the engine's queue: N - B requests wait while B are served at B / E2E per
  second (Little's law);
- throughput: B x output_len / E2E of a request, the closed-loop identity the benchmarks report
  (a request's slot emits no token during its prefill).

Not modelled: the arrivals' burstiness beyond the M/D/1 queue (a closed loop's arrivals are as
regular as its completions, so that wait is if anything high), and per-request work outside the
engine's passes (HTTP, tokenisation, detokenisation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from flopwise.errors import FlopwiseError
from flopwise.plan.infer.batching import (
    continuous_memory,
    continuous_plan,
    kv_tokens_held,
    sized_context,
    steady_concurrency,
)
from flopwise.plan.infer.context import Context
from flopwise.plan.infer.phases import Phase, decode_phase, prefill_phase
from flopwise.plan.infer.result import InferPlan
from flopwise.plan.infer.trtllm_build import EngineBuild

if TYPE_CHECKING:
    from flopwise.hardware import Hardware
    from flopwise.plan.infer.job import InferJob
    from flopwise.plan.infer.speculative import DraftConfig
    from flopwise.workload.spec import ModelSpec

#: Highest share of the time the engine may spend prefilling for the queue formula: the step
#: times already carry the prompts' work, so the share stays below 1; the cap only keeps the
#: M/D/1 wait finite where rounding would reach it.
PREFILL_BUSY_CAP = 0.95


@dataclass(frozen=True, slots=True)
class OnlineLoad:
    """What a closed loop of `concurrency` requests settles to on one replica."""

    concurrency: int  # requests in flight per replica (the client's setting / replicas)
    running: int  # sequences the engine runs at once
    capacity: int  # the most it can run (memory, sequence slots, token budget)
    prefill_chunks: int  # passes a new prompt takes
    prefill_tokens_per_step: float  # prompt tokens a mean step carries
    service_ttft_s: float  # first token after admission (its prefill and the wait for it)
    prefill_wait_s: float  # of which: behind other prompts' prefills (M/D/1)
    poll_wait_s: float  # of which: for the scheduler's next look at new requests
    prefill_busy: float  # share of the time the engine spends prefilling
    queue_wait_s: float  # mean wait before admission (0 unless concurrency > capacity)

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "running": self.running,
            "capacity": self.capacity,
            "prefill_chunks": self.prefill_chunks,
            "prefill_tokens_per_step": self.prefill_tokens_per_step,
            "service_ttft_ms": self.service_ttft_s * 1e3,
            "prefill_wait_ms": self.prefill_wait_s * 1e3,
            "poll_wait_ms": self.poll_wait_s * 1e3,
            "prefill_busy": self.prefill_busy,
            "queue_wait_ms": self.queue_wait_s * 1e3,
        }


@dataclass(frozen=True, slots=True)
class SteadyService:
    """What continuous batching does with `running` sequences at the job's lengths."""

    step: Phase  # the mean step: decode-only steps and those that carry a prompt chunk
    prefill_tokens_per_step: float
    chunks: int  # passes a new prompt takes
    budget: int  # prompt tokens a pass carries beside the running decodes
    first_token_s: float  # the prompt's passes (+ half a pass in flight), without waiting
    prefill_s: float  # one prompt's prefill alone: the prefill queue's service time


def steady_service(ctx: Context, running: float) -> SteadyService:
    """The steady step and a new prompt's time to its first token with `running` sequences.

    A prompt joins the running batch whole, or in passes of the engine's token budget when it is
    longer (vLLM/SGLang chunked prefill, TensorRT-LLM in-flight batching): those passes carry
    the other sequences' decode tokens and the prompt's chunk; every other step carries decode
    tokens only. So a share f = B x chunks / (chunks + output) of the steps carries a chunk, and
    the mean step is that mix, not every step with an even slice of the prompts: a pass reads
    the weights (and, in an MoE, the experts its tokens route to) once, whatever it carries.
    When prompts arrive faster than one per pass (f >= 1) every pass carries prompt tokens and
    they are spread evenly.
    """
    job = ctx.job
    per_step = running * job.input_len / job.output_len
    budget = max(1, int(ctx.engine.max_num_tokens - max(0.0, running - 1)))
    chunks = max(1, math.ceil(job.input_len / budget))
    chunk = job.input_len / chunks
    if running <= 1:
        # a lone prompt, chunk by chunk (each pass a 1/chunks share of its tokens and pairs)
        mixed = prefill_phase(ctx, 1.0 / chunks)
    else:
        mixed = decode_phase(ctx, running - 1, prefill_per_step=chunk)
    share = running * chunks / (chunks + job.output_len)
    if share >= 1:
        step = decode_phase(ctx, running, prefill_per_step=per_step)
    else:
        step = blend(decode_phase(ctx, running), mixed, share)
    first = chunks * mixed.time_s + (0.5 * step.time_s if running > 1 else 0.0)
    return SteadyService(
        step=step,
        prefill_tokens_per_step=per_step,
        chunks=chunks,
        budget=budget,
        first_token_s=first,
        prefill_s=prefill_phase(ctx, 1).time_s,
    )


def blend(plain: Phase, mixed: Phase, share: float) -> Phase:
    """The mean of two kinds of step, `share` of them `mixed`."""
    keep = 1.0 - share
    return Phase(
        time_s=keep * plain.time_s + share * mixed.time_s,
        breakdown=plain.breakdown.scaled(keep) + mixed.breakdown.scaled(share),
        bytes_per_gpu=keep * plain.bytes_per_gpu + share * mixed.bytes_per_gpu,
        flops_per_gpu=keep * plain.flops_per_gpu + share * mixed.flops_per_gpu,
    )


def poll_wait_s(ctx: Context, step_s: float, decoding: float) -> float:
    """Mean extra wait of a new request for the scheduler's next look at its inbox.

    An engine that looks at newly arrived requests only every N decode steps (SGLang
    ``--scheduler-recv-interval N``: "the interval to poll requests in scheduler"; SGLang
    ``--num-continuous-decode-steps N``, which "may also increase time-to-first-token latency";
    vLLM V0 multi-step scheduling, ``--num-scheduler-steps N``) admits a request that arrives
    mid-way through such a run of steps at the run's end: uniformly over the run, that is N / 2
    steps on average where an engine looking every step waits half a step (already in
    ``SteadyService.first_token_s``), so (N - 1) / 2 steps more. It applies only while the
    engine decodes (`decoding`: the share of arrivals that find other requests running): an
    idle engine's loop turns over N times at once, its iterations carrying no GPU work (SGLang's
    recv skipper counts loop iterations by what they ran: a decode or idle one 1, one with
    prompt tokens past the interval)."""
    steps = ctx.job.scheduler_poll_steps
    return 0.0 if steps <= 1 else 0.5 * (steps - 1) * step_s * min(1.0, max(0.0, decoding))


def md1_wait_s(busy: float, service_s: float) -> float:
    """Mean wait in an M/D/1 queue (Pollaczek-Khinchine) at utilisation `busy` < 1."""
    if busy <= 0:
        return 0.0
    if busy >= 1:
        raise FlopwiseError(f"utilisation {busy:.3f} >= 1: the queue grows without bound")
    return busy * service_s / (2.0 * (1.0 - busy))


def busy_replicas(total: int, replicas: int) -> float:
    """Replicas' worth of load when `total` requests in flight are split over `replicas`: each
    carries ceil(total / replicas), so total / that many are busy (all of them, or `total`)."""
    return total / math.ceil(total / replicas)


def online_context(ctx: Context) -> tuple[Context, EngineBuild | None, int]:
    """The engine sized as its builder sizes it, capped by --batch (vLLM --max-num-seqs,
    TensorRT-LLM max_batch_size, SGLang --max-running-requests), and how many sequences a
    replica runs at once; a one-line error when not even one fits."""
    from flopwise.plan.infer.planner import fit_suggestion

    ctx, build = sized_context(ctx)
    if ctx.job.batch is not None:
        ctx = replace(ctx, engine=replace(ctx.engine, max_num_seqs=ctx.job.batch))
    capacity = steady_concurrency(ctx)
    if capacity < 1:
        raise FlopwiseError(fit_suggestion(ctx.spec, ctx.hw, ctx.job))
    return ctx, build, capacity


def plan_online(ctx: Context, concurrency: int) -> InferPlan:
    """Steady state of a closed loop of `concurrency` requests in flight over the deployment,
    split evenly over its replicas (module docstring)."""
    if concurrency < 1:
        raise FlopwiseError(f"concurrency must be a positive integer, got {concurrency!r}")
    ctx, build, capacity = online_context(ctx)
    job = ctx.job
    total = concurrency
    concurrency = math.ceil(total / job.replicas)
    running = min(concurrency, capacity)
    service = steady_service(ctx, running)
    step, chunks, budget = service.step, service.chunks, service.budget
    per_step = service.prefill_tokens_per_step
    tpot = step.time_s
    # prompts queue for the prefill behind the prompts that arrived before them, at the rate
    # the loop completes requests
    e2e_guess = service.first_token_s + (job.output_len - 1) * tpot
    rho = running / e2e_guess * service.prefill_s if running > 1 else 0.0
    rho = min(PREFILL_BUSY_CAP, rho)
    prefill_wait = md1_wait_s(rho, service.prefill_s)
    # with one request in flight the engine is idle when the next one arrives
    poll_wait = poll_wait_s(ctx, tpot, 1.0 if running > 1 else 0.0)
    service_ttft = service.first_token_s + poll_wait + prefill_wait
    service_e2e = service_ttft + (job.output_len - 1) * tpot
    served_per_s = running / service_e2e
    wait = max(0, concurrency - running) / served_per_s
    load = OnlineLoad(
        concurrency=concurrency,
        running=running,
        capacity=capacity,
        prefill_chunks=chunks,
        prefill_tokens_per_step=per_step,
        service_ttft_s=service_ttft,
        prefill_wait_s=prefill_wait,
        poll_wait_s=poll_wait,
        prefill_busy=rho,
        queue_wait_s=wait,
    )
    capped = (
        f"; {concurrency:,} in flight but at most {capacity:,} run at once: the rest wait "
        f"{wait * 1e3:,.0f} ms in the queue on average (in TTFT and latency)"
        if wait > 0
        else ""
    )
    polled = (
        f"; the scheduler looks at new requests every {job.scheduler_poll_steps} decode steps: "
        f"{poll_wait * 1e3:,.1f} ms more before a prompt is admitted"
        if poll_wait > 0
        else ""
    )
    return continuous_plan(
        ctx,
        build,
        mode="online",
        batch=running,
        ttft_s=service_ttft + wait,
        tpot_s=tpot,
        e2e_latency_s=service_e2e + wait,
        # the load is split as evenly as it goes: fewer requests than replicas leave some idle
        output_tokens_per_s=running
        * job.output_len
        / service_e2e
        * busy_replicas(total, job.replicas),
        memory=replace(continuous_memory(ctx, running), max_batch=capacity),
        decode=step,
        running=running,
        request_s=service_e2e,
        notes=(
            f"online serving: a closed loop of {total:,} requests in flight (a new one as one "
            "finishes)"
            + (f", {concurrency:,} per replica" if job.replicas > 1 else "")
            + f"; {running:,} running, each holding "
            f"{kv_tokens_held(ctx):,.0f} tokens of KV; {per_step:,.0f} prompt tokens prefilled "
            f"per step on average, a new prompt in {chunks} pass{'es' if chunks > 1 else ''} of "
            f"up to {budget:,} tokens beside the running requests' decode{polled}{capped}",
        ),
        extras={"online": load.to_dict()},
    )


def plan_online_sweep(
    model: ModelSpec,
    hardware: Hardware,
    job: InferJob,
    levels: Sequence[int],
    draft: DraftConfig | None = None,
) -> list[InferPlan]:
    """The online plan at each of `levels` requests in flight (a benchmark's concurrency sweep),
    in the order given; `job` as for ``plan_inference`` with its ``concurrency`` replaced."""
    from flopwise.plan.infer.planner import plan_inference

    if not levels:
        raise FlopwiseError("a concurrency sweep needs at least one level")
    if job.num_requests is not None:
        raise FlopwiseError(
            "--num-requests with a --concurrency sweep: give one --concurrency for a benchmark "
            "run of N requests, or drop --num-requests for the steady-state sweep"
        )
    return [
        plan_inference(model, hardware, replace(job, concurrency=int(c)), draft=draft)
        for c in levels
    ]
