"""Speculative decoding: a draft model proposes k tokens, the target verifies them in one step.

With per-token acceptance rate alpha (i.i.d.), one target step yields on average
(1 - alpha^(k+1)) / (1 - alpha) tokens (Leviathan, Kalman & Matias 2023, arXiv:2211.17192,
Eq. 1). One round costs k draft decode steps plus one target step over k+1 query tokens per
sequence (the KV cache is read once for all of them), so the new TPOT is the round time over the
expected tokens. The draft runs on the same GPUs with the same tensor parallelism, and its
weights and KV cache are added to the memory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.plan.infer.context import Context
from flopwise.plan.infer.latency import make_rates
from flopwise.plan.infer.memory import kv_bytes_per_seq_per_gpu
from flopwise.plan.infer.phases import decode_phase
from flopwise.plan.infer.result import InferPlan
from flopwise.plan.infer.shard import make_shard
from flopwise.units import GIB
from flopwise.workload.spec import ModelSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class DraftConfig:
    """A draft model for speculative decoding."""

    model: ModelSpec
    acceptance: float = 0.7
    tokens: int = 4

    def __post_init__(self) -> None:
        if not 0.0 <= self.acceptance < 1.0:
            raise FlopwiseError(f"--acceptance must be in [0, 1), got {self.acceptance}")
        if not isinstance(self.tokens, int) or not 1 <= self.tokens <= 16:
            raise FlopwiseError(f"--draft-tokens must be an integer in 1..16, got {self.tokens}")


def expected_tokens_per_step(acceptance: float, k: int) -> float:
    """(1 - a^(k+1)) / (1 - a): tokens one target step yields (Leviathan et al. 2023, Eq. 1)."""
    if acceptance >= 1.0:
        return float(k + 1)
    return (1.0 - acceptance ** (k + 1)) / (1.0 - acceptance)


@dataclass(frozen=True, slots=True)
class SpeculativePlan:
    draft: str
    acceptance: float
    draft_tokens: int
    expected_tokens_per_step: float
    draft_step_s: float
    verify_step_s: float
    tpot_s: float
    baseline_tpot_s: float
    e2e_latency_s: float
    output_tokens_per_s: float
    memory_per_gpu_gib: float
    fits: bool | None

    @property
    def speedup(self) -> float:
        return self.baseline_tpot_s / self.tpot_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "draft": self.draft,
            "acceptance": self.acceptance,
            "draft_tokens": self.draft_tokens,
            "expected_tokens_per_step": self.expected_tokens_per_step,
            "draft_step_ms": self.draft_step_s * 1e3,
            "verify_step_ms": self.verify_step_s * 1e3,
            "tpot_ms": self.tpot_s * 1e3,
            "baseline_tpot_ms": self.baseline_tpot_s * 1e3,
            "speedup": self.speedup,
            "e2e_latency_s": self.e2e_latency_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "memory_per_gpu_gib": self.memory_per_gpu_gib,
            "fits": self.fits,
        }


def add_speculation(ctx: Context, plan: InferPlan, draft: DraftConfig) -> InferPlan:
    """The plan with extras['speculative']: new TPOT, speed-up, throughput and memory."""
    job, batch = ctx.job, plan.batch
    if draft.model.vocab != ctx.spec.vocab:
        raise FlopwiseError(
            f"draft {draft.model.name} has a {draft.model.vocab}-token vocabulary, "
            f"{ctx.spec.name} {ctx.spec.vocab}: speculative decoding needs the same tokenizer"
        )
    total = job.input_len + job.output_len + draft.tokens
    if total > draft.model.max_seq_len:
        raise FlopwiseError(
            f"draft {draft.model.name}'s context of {draft.model.max_seq_len} tokens is shorter "
            f"than {total}"
        )
    d_shard = make_shard(draft.model, job.tp, job.pp, ctx.precision.weight, ctx.precision.kv)
    d_ctx = replace(
        ctx,
        spec=draft.model,
        shard=d_shard,
        rates=make_rates(
            ctx.hw, ctx.engine, ctx.precision.act, ctx.precision.weight, draft.model, job.input_len
        ),
        # the draft's steps run inside the engine's iteration: its host time (fixed and per
        # request) is paid once, in the verify step below
        engine=replace(ctx.engine, step_overhead_s=0.0, host_s_per_seq=0.0),
    )
    k = draft.tokens
    draft_step = decode_phase(d_ctx, batch).time_s
    verify = decode_phase(ctx, batch, q_tokens=k + 1).time_s
    expected = expected_tokens_per_step(draft.acceptance, k)
    tpot = (k * draft_step + verify) / expected
    e2e = plan.ttft_s + (job.output_len - 1) * tpot
    if plan.mode == "continuous":
        tok_s = batch / tpot * job.replicas
    else:
        tok_s = batch * job.output_len / e2e * job.replicas
    seq = job.input_len + job.output_len
    extra = d_shard.weights_per_gpu_bytes() + batch * kv_bytes_per_seq_per_gpu(d_shard, seq)
    mem_total = plan.memory.total_bytes + extra
    usable = plan.memory.usable_bytes
    spec_plan = SpeculativePlan(
        draft=draft.model.name,
        acceptance=draft.acceptance,
        draft_tokens=k,
        expected_tokens_per_step=expected,
        draft_step_s=draft_step,
        verify_step_s=verify,
        tpot_s=tpot,
        baseline_tpot_s=plan.tpot_s,
        e2e_latency_s=e2e,
        output_tokens_per_s=tok_s,
        memory_per_gpu_gib=mem_total / GIB,
        fits=None if usable is None else mem_total <= usable,
    )
    return replace(plan, extras={**plan.extras, "speculative": spec_plan.to_dict()})
