"""``plan_inference``: latency, throughput, memory and cost of serving a model.

``num_requests`` plans an offline batch of that many requests arriving at once, run by
in-flight batching with ``batch`` (or as many as fit) running at a time (``offline.py``).
``concurrency`` plans online serving with that many requests in flight, a new one sent as one
finishes (``online.py``), in its steady state; with ``num_requests`` too, the benchmark run of
that many requests from a cold start, timed from each request's send (``offline.py``);
``request_rate`` with requests arriving at that rate (``arrivals.py``).
Otherwise a fixed ``batch`` is static batching (all requests arrive together, are prefilled together and
decode together, the way ``gptSessionBenchmark``-style benchmarks run): TTFT is the prefill of
the whole batch, TPOT the mean decode step over the generation, throughput batch x output / E2E.
``batch=None`` is the steady state of continuous batching at the largest concurrency that fits
(see ``batching.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan.infer.constants import EngineProfile
from flopwise.plan.infer.context import Context, make_context
from flopwise.plan.infer.job import InferJob
from flopwise.plan.infer.memory import MemoryPlan, plan_memory
from flopwise.plan.infer.phases import decode_phase, prefill_phase
from flopwise.plan.infer.result import InferPlan, assumptions_for, utilisation
from flopwise.plan.infer.uncertainty import (
    deployment_record,
    online_intervals,
    plan_intervals,
    validation_assumptions,
)
from flopwise.units import GIB
from flopwise.workload.spec import ModelSpec


def fit_suggestion(spec: ModelSpec, hw: Hardware, job: InferJob) -> str:
    """What would make batch 1 fit: more GPUs at this dtype, or a smaller weight dtype."""
    from dataclasses import replace

    ideas: list[str] = []
    domain = max(1, hw.scaleup_domain)
    group = job.tp * job.pp
    total = 2
    while total <= 64 and not ideas:
        if total > group:
            tp = min(total, domain)
            pp = total // tp
            trial = replace(job, tp=tp, pp=pp, batch=1, replicas=1)
            if _fits_batch1(spec, hw, trial):
                flags = f"--tp {tp}" + (f" --pp {pp}" if pp > 1 else "")
                ideas.append(f"{total} GPUs ({flags})")
        total *= 2
    for dtype in ("fp8", "int8", "int4"):
        if dtype == job.weight_dtype:
            continue
        trial = replace(job, weight_dtype=dtype, batch=1, act_dtype=None)
        if _fits_batch1(spec, hw, trial):
            ideas.append(f"--weight-dtype {dtype} on {group} GPU{'s' if group > 1 else ''}")
            break
    if not ideas:
        return f"{spec.name} does not fit on {hw.id} at any tried layout or dtype"
    return f"{spec.name} does not fit on {group} x {hw.id}; it fits on " + " or ".join(ideas)


def _fits_batch1(spec: ModelSpec, hw: Hardware, job: InferJob) -> bool:
    try:
        ctx = make_context(spec, hw, job)
    except FlopwiseError:
        return False
    mem = static_memory(ctx, 1)
    return bool(mem.fits)


def static_memory(ctx: Context, batch: int) -> MemoryPlan:
    job = ctx.job
    return plan_memory(
        ctx.shard,
        ctx.engine,
        ctx.hw.memory_bytes,
        batch,
        job.input_len + job.output_len,
        batch * job.input_len,
        ctx.rates.act_bytes,
        # a static batch's engine is built for exactly its batch, unless its sizes are given
        slot_seqs=job.engine_max_batch or batch,
    )


def plan_static(ctx: Context, batch: int) -> InferPlan:
    job = ctx.job
    prefill = prefill_phase(ctx, batch)
    decode = decode_phase(ctx, batch)
    ttft = prefill.time_s
    tpot = decode.time_s if job.output_len > 1 else 0.0
    e2e = ttft + (job.output_len - 1) * tpot
    tok_s = batch * job.output_len / e2e * job.replicas
    mem = static_memory(ctx, batch)
    mfu, mbu, peak, bw = utilisation(ctx, batch, e2e, decode)
    suggestion = None
    if mem.fits is False:
        suggestion = (
            f"batch {batch} needs {mem.total_bytes / GIB:,.1f} GiB per GPU; the largest batch "
            f"that fits is {mem.max_batch}"
            if mem.max_batch
            else fit_suggestion(ctx.spec, ctx.hw, job)
        )
    return InferPlan(
        model=ctx.spec.name,
        accelerator=ctx.hw.id,
        job=job,
        mode="static",
        batch=batch,
        precision=ctx.precision,
        engine=ctx.engine,
        ttft_s=ttft,
        tpot_s=tpot if job.output_len > 1 else decode.time_s,
        e2e_latency_s=e2e,
        output_tokens_per_s=tok_s,
        memory=mem,
        prefill=prefill,
        decode=decode,
        peak_bw_gbps=bw,
        peak_tflops=peak,
        mfu=mfu,
        mbu=mbu,
        assumptions=tuple(assumptions_for(ctx)),
        suggestion=suggestion,
    )


def plan_inference(
    model: ModelSpec,
    hardware: Hardware,
    job: InferJob,
    draft: Any = None,
    *,
    engine: EngineProfile | None = None,
) -> InferPlan:
    """Plan serving `model` on `hardware` for `job` (see the module docstring for modes).

    `draft` (a ``speculative.DraftConfig``) adds speculative decoding: expected speed-up and the
    new TPOT under ``extras["speculative"]``. `engine` replaces the named profile of
    ``job.engine`` (Python API: a custom engine; cross-validation: refitted constants).
    """
    if draft is not None and (job.concurrency is not None or job.request_rate is not None):
        raise FlopwiseError(
            "speculative decoding (--draft) is planned for a static batch or --batch max; the "
            "online modes (--concurrency, --request-rate) do not model it"
        )
    ctx = make_context(model, hardware, job, engine)
    if job.num_requests is not None:
        from flopwise.plan.infer.offline import plan_offline

        plan = plan_offline(ctx, job.num_requests, client_window=job.concurrency)
    elif job.concurrency is not None:
        from flopwise.plan.infer.online import plan_online

        plan = plan_online(ctx, job.concurrency)
    elif job.request_rate is not None:
        from flopwise.plan.infer.arrivals import plan_request_rate

        plan = plan_request_rate(ctx, float(job.request_rate))
    elif job.batch is None:
        from flopwise.plan.infer.batching import plan_continuous

        plan = plan_continuous(ctx)
    else:
        plan = plan_static(ctx, job.batch)
    intervals = plan_intervals(hardware.id, ctx.engine.name, model.is_moe)
    queued = plan.mode == "offline" or (
        plan.mode == "online" and plan.extras["online"]["queue_wait_ms"] > 0
    )
    if queued:  # TTFT there is mostly queueing, which no interval was fit on
        intervals = {k: v for k, v in intervals.items() if k != "ttft_ms"}
    if plan.mode == "rate":  # throughput is the offered load, not a prediction
        intervals = {k: v for k, v in intervals.items() if k != "output_tokens_per_s"}
    if job.concurrency is not None:  # closed loop: published sweeps of its kind size them
        intervals = {**intervals, **online_intervals(model.is_moe)}
    record = deployment_record(hardware.id, ctx.engine.name, model.is_moe, ctx.precision.weight)
    plan = replace(
        plan,
        intervals=intervals,
        assumptions=(
            *plan.assumptions,
            *validation_assumptions(
                hardware.id, ctx.precision.weight, ctx.engine.name, model.is_moe
            ),
            *((record,) if record else ()),
        ),
    )
    if draft is not None:
        from flopwise.plan.infer.speculative import add_speculation

        plan = add_speculation(ctx, plan, draft)
    from flopwise.plan.assumptions import hardware_fallbacks
    from flopwise.plan.sustained import sustained_fraction_fallback, sustained_gemm_fraction

    assumed = hardware_fallbacks(hardware, ctx.precision.act)
    assumed.update(sustained_fraction_fallback(hardware, sustained_gemm_fraction(hardware)))
    return replace(plan, extras={**plan.extras, "assumed": assumed})
