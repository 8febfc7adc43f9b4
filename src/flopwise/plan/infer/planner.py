"""``plan_inference``: latency, throughput, memory and cost of serving a model.

``num_requests`` plans an offline batch of that many requests arriving at once, run by
in-flight batching with ``batch`` (or as many as fit) running at a time (``offline.py``).
Otherwise a fixed ``batch`` is static batching (all requests arrive together, are prefilled together and
decode together, the way ``gptSessionBenchmark``-style benchmarks run): TTFT is the prefill of
the whole batch, TPOT the mean decode step over the generation, throughput batch x output / E2E.
``batch=None`` is the steady state of continuous batching at the largest concurrency that fits
(see ``batching.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan.infer.constants import EngineProfile, get_engine
from flopwise.plan.infer.job import InferJob, Precision, resolve_precision
from flopwise.plan.infer.latency import (
    Breakdown,
    Pass,
    Rates,
    engine_overhead,
    make_rates,
    node_gpus,
    stage_pass_time,
)
from flopwise.plan.infer.memory import MemoryPlan, plan_memory
from flopwise.plan.infer.shard import Shard, make_shard, mean_decode_keys, prefill_pairs
from flopwise.plan.infer.trtllm_build import with_engine_sizes
from flopwise.plan.infer.uncertainty import (
    interval_fields,
    plan_intervals,
    validation_assumptions,
)
from flopwise.plan.intervals import Interval
from flopwise.plan.roofline import collective_time_s, tier_for
from flopwise.units import GB, GIB, SECONDS_PER_HOUR, TERA
from flopwise.workload.flops import decode_flops_per_token, prefill_flops
from flopwise.workload.spec import ModelSpec


@dataclass(frozen=True, slots=True)
class Context:
    """Everything derived once per (model, hardware, job): shard, rates, engine, precision."""

    spec: ModelSpec
    hw: Hardware
    job: InferJob
    engine: EngineProfile
    precision: Precision
    shard: Shard
    rates: Rates


def make_context(
    spec: ModelSpec, hw: Hardware, job: InferJob, engine: EngineProfile | None = None
) -> Context:
    total = job.input_len + job.output_len
    if spec.learned_positions and total > spec.learned_positions:
        raise FlopwiseError(
            f"input {job.input_len} + output {job.output_len} = {total} tokens exceeds "
            f"{spec.name}'s learned position table of {spec.learned_positions} rows"
        )
    if total > spec.max_seq_len and not job.allow_long_context:
        raise FlopwiseError(
            f"input {job.input_len} + output {job.output_len} = {total} tokens exceeds "
            f"{spec.name}'s context of {spec.max_seq_len} tokens (--allow-long-context runs "
            "past it, as TensorRT-LLM's --max_seq_len and vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN do)"
        )
    if job.tp * job.pp > 1 and not (hw.scaleup_bw_uni_gbps or hw.intra_busbw_gbps):
        raise FlopwiseError(
            f"{hw.id} has no known interconnect; tensor/pipeline parallel needs one"
        )
    engine = engine or get_engine(job.engine)
    if job.memory_fraction is not None:
        engine = replace(engine, memory_fraction=job.memory_fraction)
    engine = with_engine_sizes(engine, job.engine_max_batch, job.engine_max_tokens)
    if job.fp8_context_attention is not None:
        engine = replace(engine, fp8_context_attention=job.fp8_context_attention)
    precision = resolve_precision(job, hw)
    if (job.ep > 1 or job.attention_dp) and not spec.is_moe:
        raise FlopwiseError(
            f"{spec.name} is dense: --ep and --attention-dp apply to mixture-of-experts models"
        )
    if job.ep > 1 and spec.experts % job.ep:
        raise FlopwiseError(f"--ep {job.ep} must divide {spec.name}'s {spec.experts} experts")
    shard = make_shard(
        spec, job.tp, job.pp, precision.weight, precision.kv, job.ep, job.attention_dp
    )
    rates = make_rates(hw, engine, precision.act, precision.weight)
    return Context(spec, hw, job, engine, precision, shard, rates)


@dataclass(frozen=True, slots=True)
class Phase:
    """One timed phase on one replica: its wall time and what bounds it (one GPU's view)."""

    time_s: float
    breakdown: Breakdown
    bytes_per_gpu: float  # weights + KV read by one GPU during the phase
    flops_per_gpu: float


def _p2p_s(ctx: Context, tokens: float) -> float:
    """Pipeline hand-off of `tokens` activations between two stages."""
    if ctx.job.pp <= 1:
        return 0.0
    spans = ctx.job.tp * ctx.job.pp > node_gpus(ctx.hw)
    tier = tier_for(ctx.hw, 2, spans_nodes=spans)
    return collective_time_s("send_recv", tokens * ctx.spec.hidden * 2.0, 2, tier)


def pipelined(
    ctx: Context, make_pass: Callable[[float], Pass], seqs: float, prefill: bool
) -> Phase:
    """Run `seqs` sequences through the pipeline in min(pp, seqs) micro-batches.

    Prefill latency is (microbatches + pp - 1) stage times; a decode round in steady state keeps
    every stage busy and lasts max(microbatches, pp) stage times.
    """
    pp = ctx.job.pp
    mb = max(1, min(pp, math.floor(seqs)))
    stage = stage_pass_time(ctx.shard, make_pass(seqs / mb), ctx.hw, ctx.rates, ctx.engine)
    stages = (mb + pp - 1) if prefill else max(mb, pp)
    p2p = Breakdown(comm_s=(pp - 1) * _p2p_s(ctx, make_pass(seqs / mb).tokens))
    total = stage.scaled(stages) + p2p + engine_overhead(ctx.engine, prefill)
    return Phase(
        time_s=total.total_s,
        breakdown=total,
        bytes_per_gpu=(stage.weight_bytes + stage.kv_bytes) * mb,
        flops_per_gpu=stage.flops * mb,
    )


def prefill_phase(ctx: Context, seqs: float) -> Phase:
    s = ctx.job.input_len
    full, sliding = prefill_pairs(ctx.spec, s)

    def make(n: float) -> Pass:
        return Pass(
            tokens=n * s,
            prefill_tokens=n * s,
            prefill_pairs=n * full,
            prefill_pairs_sliding=n * sliding,
            logits_rows=n,
            all_experts=True,
        )

    return pipelined(ctx, make, seqs, prefill=True)


def decode_phase(
    ctx: Context, seqs: float, q_tokens: int = 1, prefill_per_step: float = 0.0
) -> Phase:
    """Mean decode step of `seqs` sequences; optional prompt tokens interleaved into each step."""
    keys, keys_sliding = mean_decode_keys(ctx.spec, ctx.job.input_len, ctx.job.output_len)
    s = ctx.job.input_len
    full, sliding = prefill_pairs(ctx.spec, s)

    def make(n: float) -> Pass:
        share = prefill_per_step * n / seqs  # prompt tokens this micro-batch carries
        return Pass(
            tokens=n * q_tokens + share,
            decode_seqs=n,
            decode_q=q_tokens,
            decode_keys=keys,
            decode_keys_sliding=keys_sliding,
            prefill_tokens=share,
            prefill_pairs=share / s * full,
            prefill_pairs_sliding=share / s * sliding,
            logits_rows=n * q_tokens + share / s,
        )

    return pipelined(ctx, make, seqs, prefill=False)


@dataclass(frozen=True, slots=True)
class InferPlan:
    """The answer for one deployment. Times per replica; throughput for the whole deployment."""

    model: str
    accelerator: str
    job: InferJob
    mode: str  # "static" | "continuous" | "offline"
    batch: int
    precision: Precision
    engine: EngineProfile
    ttft_s: float
    tpot_s: float
    e2e_latency_s: float
    output_tokens_per_s: float
    memory: MemoryPlan
    prefill: Phase
    decode: Phase
    peak_bw_gbps: float | None
    peak_tflops: float | None
    mfu: float | None
    mbu: float | None
    assumptions: tuple[str, ...] = ()
    suggestion: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    #: 80% prediction intervals by metric (ttft_ms, tpot_ms, output_tokens_per_s)
    intervals: dict[str, Interval] = field(default_factory=dict)

    @property
    def tokens_per_s_per_user(self) -> float:
        return 1.0 / self.tpot_s if self.job.output_len > 1 else 1.0 / self.e2e_latency_s

    @property
    def fits(self) -> bool | None:
        return self.memory.fits

    @property
    def cost_per_million_output_tokens(self) -> float | None:
        price = self.job.price_per_gpu_hour
        if price is None or self.output_tokens_per_s <= 0:
            return None
        return price * self.job.gpus / SECONDS_PER_HOUR / self.output_tokens_per_s * 1e6

    def to_dict(self) -> dict[str, Any]:
        gen = self.prefill.breakdown + self.decode.breakdown.scaled(max(0, self.job.output_len - 1))
        return {
            "model": self.model,
            "accelerator": self.accelerator,
            "mode": self.mode,
            "batch": self.batch,
            "job": self.job.to_dict(),
            "precision": self.precision.to_dict(),
            "engine": self.engine.to_dict(),
            "ttft_ms": self.ttft_s * 1e3,
            "tpot_ms": self.tpot_s * 1e3,
            "e2e_latency_s": self.e2e_latency_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "tokens_per_s_per_user": self.tokens_per_s_per_user,
            "kv_cache_gib": self.memory.kv_bytes * self.job.tp * self.job.pp / GIB,
            "memory_per_gpu_gib": self.memory.total_bytes / GIB,
            "fits": self.fits,
            "max_batch": self.memory.max_batch,
            "mbu": self.mbu,
            "mfu": self.mfu,
            "cost_per_million_output_tokens": self.cost_per_million_output_tokens,
            "memory": self.memory.to_dict(),
            "breakdown": {
                "prefill": self.prefill.breakdown.to_dict(),
                "decode_step": self.decode.breakdown.to_dict(),
                "request": gen.to_dict(),
            },
            "peak_bw_gbps": self.peak_bw_gbps,
            "peak_tflops": self.peak_tflops,
            **interval_fields(
                self.intervals,
                {
                    "ttft_ms": self.ttft_s * 1e3,
                    "tpot_ms": self.tpot_s * 1e3,
                    "output_tokens_per_s": self.output_tokens_per_s,
                },
            ),
            "assumptions": list(self.assumptions),
            "suggestion": self.suggestion,
            **self.extras,
        }


def utilisation(
    ctx: Context, batch: float, e2e_s: float, decode: Phase
) -> tuple[float | None, float | None, float | None, float | None]:
    """(mfu, mbu, peak TFLOPS, peak GB/s): model FLOPs over the request, bytes per decode step."""
    hw, job = ctx.hw, ctx.job
    peak = hw.peak_tflops.get(ctx.precision.act)
    keys, _ = mean_decode_keys(ctx.spec, job.input_len, job.output_len)
    flops = prefill_flops(ctx.spec, job.input_len, ctx.shard.counts)
    flops += (job.output_len - 1) * decode_flops_per_token(ctx.spec, keys - 1, ctx.shard.counts)
    group = job.tp * job.pp
    mfu = None if not peak else batch * flops / e2e_s / (group * peak * TERA)
    bw = hw.memory_bw_gbps
    mbu = None if not bw else decode.bytes_per_gpu / decode.time_s / (bw * GB)
    return mfu, mbu, peak, bw


def assumptions_for(ctx: Context) -> list[str]:
    out = [
        f"engine class {ctx.engine.name}: {ctx.engine.step_overhead_s * 1e3:.2f} ms host time "
        f"per decode step, decode attention at {ctx.engine.decode_attention_bw_fraction:.0%} "
        "of achievable bandwidth" + (f"; {ctx.engine.features}" if ctx.engine.features else ""),
        f"precision: {ctx.precision.mode} ({ctx.precision.weight} weights, {ctx.precision.kv} "
        f"KV cache, {ctx.precision.act} GEMMs)",
        "engine memory: "
        + (
            f"the KV cache gets {ctx.engine.memory_fraction:.0%} of the memory left after "
            "weights, activations and runtime buffers"
            if ctx.engine.memory_fraction_of == "free"
            else f"weights, activations and KV cache fit in {ctx.engine.memory_fraction:.0%} "
            "of device memory"
        )
        + (" (--memory-fraction)" if ctx.job.memory_fraction is not None else " (engine default)"),
    ]
    if ctx.precision.note:
        out.append(ctx.precision.note)
    total = ctx.job.input_len + ctx.job.output_len
    if total > ctx.spec.max_seq_len:
        out.append(
            f"{total:,} tokens per sequence run past {ctx.spec.name}'s trained context of "
            f"{ctx.spec.max_seq_len:,} (--allow-long-context): timed as any sequence of that "
            "length; output quality past the context is not assessed"
        )
    if ctx.spec.is_moe:
        out.append(ctx.job.moe_layout_note())
    return out


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
    ctx = make_context(model, hardware, job, engine)
    if job.num_requests is not None:
        from flopwise.plan.infer.offline import plan_offline

        plan = plan_offline(ctx, job.num_requests)
    elif job.batch is None:
        from flopwise.plan.infer.batching import plan_continuous

        plan = plan_continuous(ctx)
    else:
        plan = plan_static(ctx, job.batch)
    intervals = plan_intervals(hardware.id, ctx.engine.name, model.is_moe)
    if plan.mode == "offline":  # TTFT there is mostly queueing, which no interval was fit on
        intervals = {k: v for k, v in intervals.items() if k != "ttft_ms"}
    plan = replace(
        plan,
        intervals=intervals,
        assumptions=(*plan.assumptions, *validation_assumptions(hardware.id)),
    )
    if draft is not None:
        from flopwise.plan.infer.speculative import add_speculation

        plan = add_speculation(ctx, plan, draft)
    from flopwise.plan.assumptions import hardware_fallbacks

    assumed = hardware_fallbacks(hardware, ctx.precision.act)
    return replace(plan, extras={**plan.extras, "assumed": assumed})
