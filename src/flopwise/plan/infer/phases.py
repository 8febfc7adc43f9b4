"""Timed phases of one replica: a prefill of some sequences and a mean decode step, run
through the pipeline stages in micro-batches."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass

from flopwise.plan.infer.comm import node_gpus
from flopwise.plan.infer.context import Context
from flopwise.plan.infer.dispatch import eager_dispatch_s
from flopwise.plan.infer.latency import Breakdown, Pass, engine_overhead, stage_pass_time
from flopwise.plan.infer.prefill_graphs import prompt_pass_graphed
from flopwise.plan.infer.shard import mean_decode_keys, prefill_pairs
from flopwise.plan.roofline import collective_time_s, tier_for


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


def microbatches(pp: int, seqs: float) -> int:
    """Micro-batches a pass of `seqs` sequences is split into over `pp` pipeline stages."""
    return max(1, min(pp, math.floor(seqs)))


def pipelined(
    ctx: Context,
    make_pass: Callable[[float], Pass],
    seqs: float,
    prefill: bool,
    requests: float | None = None,
    eager: bool = False,
) -> Phase:
    """Run `seqs` sequences through the pipeline in min(pp, seqs) micro-batches.

    Prefill latency is (microbatches + pp - 1) stage times; a decode round in steady state keeps
    every stage busy and lasts max(microbatches, pp) stage times. The engine's host time is
    charged for `requests` requests (default `seqs`), split over attention-DP ranks, each of
    which runs its own executor; an `eager` pass (one that replays no CUDA graph, on an engine
    that runs those from Python: EngineProfile.eager_python_dispatch) adds the host time of
    dispatching each stage's ops (plan/infer/dispatch.py), once per stage pass.
    """
    pp = ctx.job.pp
    mb = microbatches(pp, seqs)
    micro = make_pass(seqs / mb)  # one micro-batch's pass through one stage
    stage = stage_pass_time(ctx.shard, micro, ctx.hw, ctx.rates, ctx.engine)
    stages = (mb + pp - 1) if prefill else max(mb, pp)
    p2p = Breakdown(comm_s=(pp - 1) * _p2p_s(ctx, micro.tokens))
    device = stage.scaled(stages) + p2p
    per_executor = (seqs if requests is None else requests) / ctx.shard.attn_dp
    dispatch = 0.0
    if eager and ctx.engine.eager_python_dispatch:
        dispatch = stages * eager_dispatch_s(
            ctx.spec,
            ctx.precision,
            ctx.hw.id,
            ctx.spec.layers / pp,
            ctx.engine.calls_per_counted_op,
        )
    total = device + engine_overhead(
        ctx.engine, prefill, ctx.hw.id, per_executor, device.total_s, dispatch
    )
    return Phase(
        time_s=total.total_s,
        breakdown=total,
        bytes_per_gpu=(stage.weight_bytes + stage.kv_bytes) * mb,
        flops_per_gpu=stage.flops * mb,
    )


def graph_batch_cap(max_num_seqs: int | None, max_num_tokens: int) -> int:
    """The largest decode batch an engine captures a CUDA graph for: its sequence slots, and
    one token per sequence within its token budget (TensorRT-LLM
    ``_filter_cuda_graph_batch_sizes``: min(max_batch_size, max_num_tokens))."""
    return max_num_tokens if max_num_seqs is None else min(max_num_seqs, max_num_tokens)


def padded_rows(captured: tuple[int, ...], seqs: float, cap: int | None = None) -> float:
    """GEMM rows per real sequence of a decode-only pass of `seqs` sequences on an engine that
    pads to its captured CUDA-graph batch sizes `captured` (sorted): the smallest captured size
    >= ceil(seqs), over seqs; 1 without captured sizes or above the largest (run eagerly).

    With the engine's `cap` (graph_batch_cap), the sizes above it are not captured and, as
    TensorRT-LLM's filter does when padding is on and a larger size was asked for, the cap
    itself is captured in their place."""
    captured = _captured(captured, cap)
    if not captured or seqs <= 0:
        return 1.0
    need = math.ceil(seqs - 1e-9)
    i = bisect.bisect_left(captured, need)
    return captured[i] / seqs if i < len(captured) else 1.0


def _captured(captured: tuple[int, ...], cap: int | None) -> tuple[int, ...]:
    """The batch sizes an engine captures of those asked for (sorted), with its `cap`
    (graph_batch_cap) in place of the sizes above it."""
    if cap is not None and captured and captured[-1] > cap:
        return (*(b for b in captured if b < cap), cap)
    return captured


def beyond_graphs(captured: tuple[int, ...], seqs: float, cap: int | None = None) -> bool:
    """Whether a decode-only pass of `seqs` sequences is larger than every batch the engine
    captured a CUDA graph for (`captured` given), and so runs eagerly. Where the captured sizes
    reach the engine's `cap` no pass it schedules is larger (a size past the cap is a point
    the planner interpolates through, not a pass)."""
    captured = _captured(captured, cap)
    if not captured or (cap is not None and captured[-1] >= cap):
        return False
    return math.ceil(seqs - 1e-9) > captured[-1]


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

    # one micro-batch's prompt tokens per pass, at most a prefill chunk
    pass_tokens = min(seqs / microbatches(ctx.job.pp, seqs) * s, ctx.engine.max_num_tokens)
    eager = not prompt_pass_graphed(ctx, pass_tokens)
    return pipelined(ctx, make, seqs, prefill=True, eager=eager)


def decode_phase(
    ctx: Context, seqs: float, q_tokens: int = 1, prefill_per_step: float = 0.0
) -> Phase:
    """Mean decode step of `seqs` sequences; optional prompt tokens interleaved into each step.

    A decode-only pass (no prompt tokens, one query token) of an engine that captured CUDA
    graphs with padding (InferJob.cuda_graph_batch_sizes) runs the smallest captured batch at
    least as large as each executor's sequences: its GEMMs and LM head process the padded rows,
    while the dummy requests' attention reads next to no KV and the host walks only the real
    requests. A pass with prompt tokens, or a decode-only one larger than every captured
    batch, runs eagerly (its ops dispatched one by one where the engine runs them from Python:
    EngineProfile.eager_python_dispatch)."""
    keys, keys_sliding = mean_decode_keys(ctx.spec, ctx.job.input_len, ctx.job.output_len)
    graphed = prefill_per_step == 0 and q_tokens == 1
    cap = graph_batch_cap(ctx.engine.max_num_seqs, ctx.engine.max_num_tokens)
    micro = seqs / microbatches(ctx.job.pp, seqs)  # the micro-batch pipelined runs
    # a pass with prompt tokens, or a decode-only one above every captured graph, runs eagerly
    eager = (
        prefill_per_step > 0 and not prompt_pass_graphed(ctx, micro * q_tokens + prefill_per_step)
    ) or (graphed and beyond_graphs(ctx.job.cuda_graph_batch_sizes, micro / ctx.shard.attn_dp, cap))
    if not ctx.shard.decode_local:  # chunked layers decode over every cached token
        keys_sliding = keys
    s = ctx.job.input_len
    full, sliding = prefill_pairs(ctx.spec, s)

    def make(n: float) -> Pass:
        share = prefill_per_step * n / seqs  # prompt tokens this micro-batch carries
        # each micro-batch of each attention-DP executor replays its own graph
        rows_per_seq = (
            padded_rows(ctx.job.cuda_graph_batch_sizes, n / ctx.shard.attn_dp, cap)
            if graphed
            else 1.0
        )
        return Pass(
            tokens=n * q_tokens * rows_per_seq + share,
            decode_seqs=n,
            decode_q=q_tokens,
            decode_keys=keys,
            decode_keys_sliding=keys_sliding,
            prefill_tokens=share,
            prefill_pairs=share / s * full,
            prefill_pairs_sliding=share / s * sliding,
            logits_rows=n * q_tokens * rows_per_seq + share / s,
        )

    # a prompt joining this step is one more request for the host to walk
    return pipelined(
        ctx,
        make,
        seqs,
        prefill=False,
        requests=seqs + prefill_per_step / s,
        eager=eager,
    )
