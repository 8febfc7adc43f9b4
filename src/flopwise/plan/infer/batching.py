"""``--batch max``: steady-state continuous batching at the given lengths.

With paged KV, a running sequence holds on average input + output/2 tokens, so the concurrency
that fits is (usable memory - weights - workspace - reserve) / KV of that mean sequence, capped by
the engine's max_num_seqs. In steady state each of B running sequences finishes after
output_len steps, so B/output_len new requests join per step; each prompt is prefilled in a
pass (or passes of the engine's token budget) beside the running decode tokens, the other steps
decode only (vLLM and SGLang chunked prefill, TensorRT-LLM in-flight batching; the mean step is
``online.steady_service``'s). Output throughput is B / step time; TTFT is the service time of a
new prompt without queueing.

Engines whose builder sizes them from the job (TensorRT-LLM built by ``trtllm-bench build
--dataset``) first get those sizes: the running requests are capped at the engine's
max_batch_size and the activation workspace is sized by its max_num_tokens
(``trtllm_build.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.plan.infer.context import Context
from flopwise.plan.infer.memory import MemoryPlan, plan_memory
from flopwise.plan.infer.phases import Phase, prefill_phase
from flopwise.plan.infer.planner import fit_suggestion
from flopwise.plan.infer.result import InferPlan, assumptions_for, utilisation
from flopwise.plan.infer.trtllm_build import (
    PIPELINE_MICRO_BATCH_SOURCE,
    EngineBuild,
    built_engine,
)


def sized_context(ctx: Context) -> tuple[Context, EngineBuild | None]:
    """The context with the engine sized the way its builder sizes it for this job."""
    job, prec = ctx.job, ctx.precision
    engine, build = built_engine(
        ctx.engine,
        ctx.spec,
        float(ctx.shard.counts.total),
        job.tp,
        job.pp,
        prec.weight,
        prec.kv,
        ctx.hw.memory_bytes,
        job.input_len,
        job.output_len,
        given_batch=job.engine_max_batch,
        given_tokens=job.engine_max_tokens,
    )
    return (ctx if build is None else replace(ctx, engine=engine)), build


def continuous_memory(ctx: Context, batch: int) -> MemoryPlan:
    job = ctx.job
    prefill_per_step = batch * job.input_len / job.output_len
    return plan_memory(
        ctx.shard,
        ctx.engine,
        ctx.hw.memory_bytes,
        batch,
        job.input_len + job.output_len,
        batch + prefill_per_step,
        ctx.rates.act_bytes,
        kv_tokens_per_seq=kv_tokens_held(ctx),
    )


def kv_tokens_held(ctx: Context) -> float:
    """KV tokens a running sequence holds: all of input + output, in whole KV blocks, when the
    engine reserves the whole request up front (TensorRT-LLM GUARANTEED_NO_EVICT), else the
    paged mean."""
    job = ctx.job
    if ctx.engine.kv_reservation == "full":
        block = max(1, ctx.engine.kv_block_tokens)
        return float(math.ceil((job.input_len + job.output_len) / block) * block)
    return job.input_len + job.output_len / 2.0


def max_concurrency(ctx: Context) -> int:
    """Largest number of running sequences that fit (and the engine allows)."""
    if ctx.hw.memory_bytes is None:
        raise FlopwiseError(
            f"{ctx.hw.id} has no known memory size; --batch max needs it (give --batch N)"
        )
    probe = continuous_memory(ctx, 1)
    best = probe.max_batch or 0
    # the workspace grows with the batch's prefill share: step down until it truly fits
    while best > 0 and not continuous_memory(ctx, best).fits:
        best = max(0, int(best * 0.98))
    if ctx.engine.max_num_seqs is not None:
        best = min(best, ctx.engine.max_num_seqs)
    return best


def steady_concurrency(ctx: Context) -> int:
    """Running sequences in the steady state: what fits, and for engines sized by their builder
    also what the engine's token budget carries ("Max Runtime Tokens": each step holds B decode
    tokens and B x input/output prompt tokens, and the scheduler holds new prompts back)."""
    best = max_concurrency(ctx)
    if ctx.engine.build_sizing:
        job = ctx.job
        budget = ctx.engine.max_num_tokens / (1 + job.input_len / job.output_len)
        best = min(best, max(1, math.floor(budget)))
    return best


def plan_continuous(ctx: Context) -> InferPlan:
    ctx, build = sized_context(ctx)
    job = ctx.job
    batch = steady_concurrency(ctx)
    if batch < 1:
        raise FlopwiseError(fit_suggestion(ctx.spec, ctx.hw, job))
    from flopwise.plan.infer.online import steady_service

    # prompts join the batch in whole passes beside the running decodes (online.steady_service)
    service = steady_service(ctx, batch)
    per_step = service.prefill_tokens_per_step
    step = service.step
    ttft = service.first_token_s
    tpot = step.time_s
    e2e = ttft + (job.output_len - 1) * tpot
    tok_s = batch / tpot * job.replicas
    return continuous_plan(
        ctx,
        build,
        mode="continuous",
        batch=batch,
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_latency_s=e2e,
        output_tokens_per_s=tok_s,
        memory=replace(continuous_memory(ctx, batch), max_batch=batch),
        decode=step,
        running=batch,
        request_s=job.output_len * tpot,
        notes=(
            f"continuous batching: {batch} running sequences holding "
            f"{kv_tokens_held(ctx):,.0f} tokens of KV each "
            f"({'whole request reserved' if ctx.engine.kv_reservation == 'full' else 'paged'}), "
            f"{per_step:,.0f} prompt tokens prefilled per step on average, each prompt in "
            f"{service.chunks} pass{'es' if service.chunks > 1 else ''} beside the running "
            "decodes; TTFT excludes queueing",
        ),
        extras={"prefill_tokens_per_step": per_step},
    )


def continuous_plan(
    ctx: Context,
    build: EngineBuild | None,
    *,
    mode: str,
    batch: int,
    ttft_s: float,
    tpot_s: float,
    e2e_latency_s: float,
    output_tokens_per_s: float,
    memory: MemoryPlan,
    decode: Phase,
    running: float,
    request_s: float,
    notes: Sequence[str],
    extras: dict[str, Any],
    closing_notes: Sequence[str] = (),
) -> InferPlan:
    """The InferPlan of a continuous-batching mode (continuous, offline, online, rate) from what
    the mode worked out. What they all share is filled in here: a lone prompt's prefill, MFU and
    MBU of `running` requests over `request_s` each (``result.utilisation``), the assumptions
    (the context's, the mode's `notes`, the engine build's, then `closing_notes`) and the build
    sizes beside the mode's `extras`."""
    mfu, mbu, peak, bw = utilisation(ctx, running, request_s, decode)
    return InferPlan(
        model=ctx.spec.name,
        accelerator=ctx.hw.id,
        job=ctx.job,
        mode=mode,
        batch=batch,
        precision=ctx.precision,
        engine=ctx.engine,
        ttft_s=ttft_s,
        tpot_s=tpot_s,
        e2e_latency_s=e2e_latency_s,
        output_tokens_per_s=output_tokens_per_s,
        memory=memory,
        prefill=prefill_phase(ctx, 1),
        decode=decode,
        peak_bw_gbps=bw,
        peak_tflops=peak,
        mfu=mfu,
        mbu=mbu,
        assumptions=(*assumptions_for(ctx), *notes, *build_note(build), *closing_notes),
        extras={**extras, **build_extras(build)},
    )


def build_extras(build: EngineBuild | None) -> dict[str, int]:
    """The engine's build sizes for a plan's JSON (none when the engine is not builder-sized)."""
    if build is None:
        return {}
    return {
        "engine_max_batch_size": build.max_batch_size,
        "engine_max_num_tokens": build.max_num_tokens,
    }


def build_note(build: EngineBuild | None) -> tuple[str, ...]:
    if build is None:
        return ()
    stages: tuple[str, ...] = ()
    if build.micro_batches > 1:
        stages = (
            f"{build.micro_batches} pipeline micro-batches in flight: up to "
            f"{build.max_batch_size * build.micro_batches:,} sequences at once "
            f"({PIPELINE_MICRO_BATCH_SOURCE})",
        )
    if build.kv_requests_estimate is None:
        return (
            f"engine built with max_batch_size {build.max_batch_size}, max_num_tokens "
            f"{build.max_num_tokens} (given); its runtime and decoder buffers are sized by "
            "the batch, its activations by the tokens",
            *stages,
        )
    return (
        f"engine built as trtllm-bench build --dataset sizes it: max_batch_size "
        f"{build.max_batch_size}, max_num_tokens {build.max_num_tokens} (its estimate: "
        f"{build.kv_requests_estimate:,.0f} requests fit the KV cache)",
        *stages,
    )
