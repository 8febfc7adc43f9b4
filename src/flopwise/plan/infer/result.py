"""``InferPlan``, the answer for one deployment, and what it states beside its numbers:
utilisation (MFU, MBU) and the assumptions behind the figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flopwise.plan.infer.comm import tp_comm_note
from flopwise.plan.infer.constants import (
    SGLANG_EAGER_PASS_SOURCE,
    EngineProfile,
    host_s_per_op,
    host_s_per_request,
)
from flopwise.plan.infer.context import Context
from flopwise.plan.infer.dispatch import eager_dispatch_s, eager_ops_per_layer
from flopwise.plan.infer.job import InferJob, Precision
from flopwise.plan.infer.memory import MemoryPlan
from flopwise.plan.infer.phases import Phase
from flopwise.plan.infer.prefill_graphs import prompt_pass_words
from flopwise.plan.infer.shard import mean_decode_keys
from flopwise.plan.infer.uncertainty import interval_fields
from flopwise.plan.intervals import Interval
from flopwise.units import GB, GIB, SECONDS_PER_HOUR, TERA
from flopwise.workload.flops import decode_flops_per_token, prefill_flops


@dataclass(frozen=True, slots=True)
class InferPlan:
    """The answer for one deployment. Times per replica; throughput for the whole deployment."""

    model: str
    accelerator: str
    job: InferJob
    mode: str  # "static" | "continuous" | "offline" | "online" | "rate"
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
            "engine": {
                **self.engine.to_dict(),
                # the per-request host time on this deployment's host (host_s_per_seq is Grace's)
                "host_s_per_request": host_s_per_request(self.engine, self.accelerator),
                # ... and per op of an eagerly dispatched pass (plan/infer/dispatch.py)
                "host_s_per_op": (
                    host_s_per_op(self.accelerator) if self.engine.eager_python_dispatch else None
                ),
            },
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


def _host_time_words(engine: EngineProfile, accelerator_id: str) -> str:
    """The engine's host time per decode step, in words, on the host of `accelerator_id`."""
    words = f"{engine.step_overhead_s * 1e3:.2f} ms host time per decode step"
    if engine.host_s_per_seq:
        words += (
            f" plus {host_s_per_request(engine, accelerator_id) * 1e6:.1f} us per running "
            "request on this host"
        )
        if engine.host_overlap:
            words += " (overlapped with the GPU's step; only what exceeds it shows)"
    return words


def _eager_words(ctx: Context) -> str:
    """What an eager pass (one replaying no CUDA graph) costs the host, in words; nothing where
    the engine runs no pass from Python."""
    if not ctx.engine.eager_python_dispatch:
        return ""
    engine = ctx.engine
    ops = eager_ops_per_layer(ctx.spec, ctx.precision)
    per_op = host_s_per_op(ctx.hw.id)
    stage_s = eager_dispatch_s(
        ctx.spec,
        ctx.precision,
        ctx.hw.id,
        ctx.spec.layers / ctx.job.pp,
        engine.calls_per_counted_op,
    )
    calls = (
        f" x {engine.calls_per_counted_op:g} calls each ({SGLANG_EAGER_PASS_SOURCE})"
        if engine.calls_per_counted_op != 1.0
        else ""
    )
    return (
        f"; {prompt_pass_words(ctx)}; an eager pass (and a decode pass above the captured "
        f"CUDA-graph batches) dispatches {ops:.1f} ops per layer{calls} from "
        f"Python at {per_op * 1e6:.1f} us each on this host, {stage_s * 1e3:.1f} ms "
        "per pass per pipeline stage (plan/infer/dispatch.py)"
    )


def _decode_kernel_words(engine: EngineProfile) -> str:
    """How a per-head (masked MHA) decode kernel is priced, in words; nothing for grouped."""
    if engine.decode_kernel != "per-head":
        return ""
    return (
        " or, where longer, its masked-MHA kernel's CUDA-core work (one pass per query head, "
        f"{engine.mmha_ops_per_sm_clock:g} multiply-adds per SM per clock: "
        "MMHA_OPS_PER_SM_CLOCK, fitted on published TensorRT-LLM 0.5/0.9 runs)"
    )


def assumptions_for(ctx: Context) -> list[str]:
    out = [
        f"engine class {ctx.engine.name}: {_host_time_words(ctx.engine, ctx.hw.id)}"
        + _eager_words(ctx)
        + f", decode attention at {ctx.engine.decode_attention_bw_fraction:.0%} "
        "of achievable bandwidth"
        + _decode_kernel_words(ctx.engine)
        + (f"; {ctx.engine.features}" if ctx.engine.features else ""),
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
    if ctx.job.prefill_cuda_graphs is not None and not ctx.engine.eager_python_dispatch:
        out.append(
            f"--{'' if ctx.job.prefill_cuda_graphs else 'no-'}prefill-cuda-graphs changes "
            f"nothing on {ctx.engine.name}: its passes are not priced op by op from Python"
        )
    if ctx.rates.attn_basis != "engine":
        where = {
            "measured": "the fused kernel measured on this device (flopwise bench attention)",
            "published": "the Blackwell die's cuDNN fused-attention curve, published by NVIDIA "
            "(cudnn-frontend benchmark results; plan/efficiency.py BLACKWELL_ATTENTION),",
        }.get(
            ctx.rates.attn_basis,
            "the GH100 die's fused-attention curve, measured on an H100 (plan/efficiency.py "
            "GH100_ATTENTION),",
        )
        out.append(
            f"prefill attention at {ctx.rates.attn_flops_s / TERA:,.0f} TFLOPS per GPU: {where} "
            f"at the prompt's {ctx.job.input_len:,} tokens x the share it keeps under sustained "
            "load"
        )
    if ctx.rates.compute_share_basis == "measured":
        out.append(
            f"GEMMs at {ctx.rates.compute_share:.3f} of the matmul ceiling: the share this "
            "device kept under sustained load (flopwise bench sustained"
            + (", its fp8 run)" if ctx.hw.gemm_share_run(ctx.rates.act_dtype) == "fp8" else ")")
        )
    elif ctx.rates.compute_share_basis == "power-capped":
        out.append(
            f"GEMMs at {ctx.rates.compute_share:.3f} of the matmul ceiling: the share the die "
            "keeps under sustained load at its power cap, measured (plan/sustained.py "
            "POWER_CAPPED_SHARE); a training step's fitted fraction also holds launch gaps and "
            "overlapped collectives, which a serving engine does not run"
        )
    else:
        out.append(
            f"GEMMs at {ctx.rates.compute_share:.3f} of the matmul ceiling: the die's training "
            "fraction (plan/sustained.py); no sustained-load measurement of this die isolates "
            "its power cap"
        )
    if ctx.job.cuda_graph_batch_sizes:
        sizes = ctx.job.cuda_graph_batch_sizes
        out.append(
            "decode-only passes replay CUDA graphs captured at batch "
            f"{', '.join(f'{b:,}' for b in sizes)} with padding (--cuda-graph-batch-sizes): "
            "each executor's sequences run the smallest captured batch at least as large, the "
            "GEMMs over the padded rows; sizes above the engine's min(max_batch_size, "
            "max_num_tokens) are replaced by it; passes with prompt tokens are not padded"
        )
    comm = tp_comm_note(ctx.hw, ctx.job.tp)
    if comm:
        out.append(comm)
    total = ctx.job.input_len + ctx.job.output_len
    if total > ctx.spec.max_seq_len:
        out.append(
            f"{total:,} tokens per sequence run past {ctx.spec.name}'s trained context of "
            f"{ctx.spec.max_seq_len:,} (--allow-long-context): timed as any sequence of that "
            "length; output quality past the context is not assessed"
        )
    if ctx.spec.is_moe:
        note = ctx.job.moe_layout_note()
        if ctx.shard.dense_whole:
            note += (
                f"; under {ctx.engine.name}'s attention data parallelism the dense MLP layers, "
                "shared experts, embedding and lm_head are whole on every rank and run on its "
                "own sequences (no collective in dense layers, no logits all-gather)"
            )
        out.append(note)
    return out
