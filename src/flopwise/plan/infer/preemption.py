"""Offline batches on engines that admit on the prompt and preempt by recompute (vLLM).

vLLM's scheduler admits a waiting request when its prompt's KV blocks are free (V0
``BlockSpaceManager.can_allocate``; V1 ``KVCacheManager.allocate_slots`` for the tokens scheduled
this step), not when its whole output would fit. A running request then takes one more KV slot
every step. When a step's slots cannot be allocated the scheduler preempts the newest running
request (V0 ``running_queue.pop()``; V1 FCFS ``self.running.pop()``), frees all its blocks and
puts it back at the FRONT of the waiting queue (V0 ``waiting.extendleft``, V1
``waiting.prepend_request``) with ``num_computed_tokens = 0``: when blocks free up again its
prompt AND the tokens it had generated are prefilled again ("Preempted requests are recomputed
when sufficient KV cache space becomes available again", vLLM docs, Optimization and Tuning >
Preemption; RECOMPUTE is the default mode of V0 for single-sequence requests and the only one of
V1).

An offline batch whose requests all start together grows in lockstep: the KV it holds peaks at
(input + output) per request at the end, not at the paged mean (input + output/2). When that
peak exceeds the pool, the newest requests are preempted one after another as the batch grows,
wait until the oldest finish, and then re-prefill everything they had. ``simulate_preempting``
runs that pass by pass (passes with nothing to admit and nothing to preempt are advanced in
one jump), with each pass timed by the same roofline as every other plan.

Not modelled: prefix-cache hits on a preempted request's freed blocks (under KV pressure the
growing batch reuses those blocks first); V0's 1% block watermark on admission; block rounding
(tokens, not 16-token blocks, are counted).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.plan.infer.memory import (
    engine_fixed_bytes,
    kv_bytes_per_seq_per_gpu,
    usable_bytes,
)
from flopwise.plan.infer.offline import OfflineRun, StepTime, require_positive

#: What EngineProfile.preemption names for an engine that admits on the prompt and, when the KV
#: pool is full, preempts the newest running request and recomputes it later.
RECOMPUTE = "recompute"


@dataclass(frozen=True, slots=True)
class Preemption:
    """What preemption cost one replica's offline batch."""

    kv_capacity_tokens: float  # tokens the engine's KV pool holds (one replica)
    peak_demand_tokens: float  # what the lockstep batch would hold at its longest
    preemptions: int  # requests preempted (a request preempted twice counts twice)
    recomputed_tokens: int  # prompt + generated tokens prefilled again

    def to_dict(self) -> dict[str, Any]:
        return {
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "peak_demand_tokens": self.peak_demand_tokens,
            "preemptions": self.preemptions,
            "recomputed_tokens": self.recomputed_tokens,
        }


def kv_capacity_tokens(ctx: Any, max_seqs: int) -> float | None:
    """Tokens of KV cache the engine's pool holds on one replica (None: memory unknown).

    The pool is what the engine's memory fraction leaves after the weights, the runtime reserve,
    the largest forward pass's activations and per-slot buffers (``memory.plan_memory``), less
    the fp32 logits of `max_seqs` running sequences; a token costs the KV bytes of one position
    on one GPU (sliding-window layers averaged over a whole request).
    """
    sh, job, engine = ctx.shard, ctx.job, ctx.engine
    seq = job.input_len + job.output_len
    fixed, slots = engine_fixed_bytes(sh, engine, ctx.rates.act_bytes, seq)
    usable = usable_bytes(engine, ctx.hw.memory_bytes, fixed)
    if usable is None:
        return None
    logits = 0.0 if slots else max_seqs * sh.logits_out * 4.0
    free = usable - fixed - logits
    per_token = kv_bytes_per_seq_per_gpu(sh, seq) / seq / sh.attn_dp
    return max(0.0, free / per_token) if per_token > 0 else None


@dataclass(slots=True)
class _Cohort:
    """Requests admitted in the same pass with the same prompt: they advance in lockstep."""

    count: int
    prompt: int  # tokens prefilled on admission (input + tokens generated before a preemption)
    start: int  # the pass that prefilled them (and produced their first new token)
    remaining: int  # output tokens still to produce from that pass on (>= 1)
    first_s: float  # time of the request's very first output token (-1: not yet)
    key: int  # admission order: the heap of finishes refers to cohorts by it

    @property
    def last(self) -> int:
        return self.start + self.remaining - 1

    def held(self, step: int) -> int:
        """KV slots one of them needs in pass `step` (>= start)."""
        return self.prompt + step - self.start


def simulate_preempting(
    step_time: StepTime,
    num_requests: int,
    max_seqs: int,
    input_len: int,
    output_len: int,
    token_budget: int,
    kv_tokens: float,
) -> tuple[OfflineRun, Preemption]:
    """Run `num_requests` fixed-length requests through a prompt-admitting, preempting engine.

    Per pass: every running request takes one KV slot (preempting the newest running requests,
    back to the front of the queue, while the pool cannot hold them), then queued requests join
    first come first served while the pool holds their prompt, fewer than `max_seqs` run and the
    pass has `token_budget` room (decode tokens count against it). A prompt longer than a pass
    can hold joins alone. `step_time(decoding, prompt_tokens)` times the pass.
    """
    require_positive(
        num_requests=num_requests,
        max_seqs=max_seqs,
        input_len=input_len,
        output_len=output_len,
        token_budget=token_budget,
    )
    if input_len + output_len > kv_tokens:
        raise FlopwiseError(
            f"offline batch: one request of {input_len + output_len:,} tokens does not fit the "
            f"engine's KV cache of {kv_tokens:,.0f} tokens"
        )
    # (count, prompt tokens, output tokens still to produce, first-token time or -1)
    waiting: deque[tuple[int, int, int, float]] = deque(
        [(num_requests, input_len, output_len, -1.0)]
    )
    running: list[_Cohort] = []  # oldest first: preemption pops from the end
    finishes: list[tuple[int, int]] = []  # heap of (last pass, cohort key)
    by_id: dict[int, _Cohort] = {}
    next_key = 0
    step, now = 0, 0.0
    n_running = 0
    base = 0  # sum over running cohorts of count x (prompt - start): held(step) = base + step x n
    preemptions = recomputed = 0
    ttft_sum = tpot_sum = latency_sum = running_area = 0.0
    while waiting or running:
        # 1. every running request takes a slot for this pass; preempt the newest while full
        while running and base + step * n_running > kv_tokens:
            newest = running[-1]
            need = newest.held(step)
            excess = base + step * n_running - kv_tokens
            k = max(1, min(newest.count, math.ceil(excess / need)))
            generated = step - newest.start
            waiting.appendleft(
                (k, newest.prompt + generated, newest.remaining - generated, newest.first_s)
            )
            preemptions += k
            recomputed += k * (newest.prompt + generated)
            newest.count -= k
            base -= k * (newest.prompt - newest.start)
            n_running -= k
            if newest.count == 0:
                running.pop()
                by_id.pop(newest.key, None)
        decoding = n_running
        # 2. queued requests join while the pool, the slots and the pass's budget allow
        free = kv_tokens - (base + step * n_running)
        room = token_budget - decoding
        prompt_tokens = 0
        admitted: list[_Cohort] = []
        while waiting:
            count, prompt, remaining, first = waiting[0]
            slots = max_seqs - n_running
            k = min(count, slots, int(free // prompt))
            # a prompt longer than any pass can hold is prefilled alone (chunked in the engine)
            k = min(k, room // prompt) if prompt <= token_budget else min(k, int(not admitted))
            if k <= 0:
                break
            waiting.popleft()
            if k < count:
                waiting.appendleft((count - k, prompt, remaining, first))
            cohort = _Cohort(k, prompt, step, remaining, first, next_key)
            next_key += 1
            admitted.append(cohort)
            running.append(cohort)
            by_id[cohort.key] = cohort
            heapq.heappush(finishes, (cohort.last, cohort.key))
            base += k * (prompt - step)
            n_running += k
            free -= k * prompt
            room -= k * prompt
            prompt_tokens += k * prompt
        # 3. time the pass, or a run of identical passes when nobody joins or is preempted
        passes = 1
        if not admitted and running:
            next_finish = _next_finish(finishes, by_id)
            passes = next_finish - step + 1
            if n_running:
                headroom = int((kv_tokens - (base + step * n_running)) // n_running)
                passes = max(1, min(passes, headroom + 1))
        elif not running:  # pragma: no cover - an empty pool always admits the queue's head
            raise FlopwiseError("offline batch: the engine cannot make progress")
        dt = step_time(decoding, prompt_tokens)
        now += dt * passes
        running_area += decoding * dt * passes
        for cohort in admitted:  # a pass that admits is timed alone (passes == 1)
            if cohort.first_s < 0:
                cohort.first_s = now
                ttft_sum += cohort.count * now
        step += passes
        # 4. requests whose last token came out of this pass leave and free their KV
        while finishes and finishes[0][0] < step:
            _, key = heapq.heappop(finishes)
            done = by_id.pop(key, None)
            if done is None:
                continue
            running.remove(done)
            base -= done.count * (done.prompt - done.start)
            n_running -= done.count
            latency_sum += done.count * now
            if output_len > 1:
                tpot_sum += done.count * (now - done.first_s) / (output_len - 1)
    n = num_requests
    sums = (ttft_sum, tpot_sum, latency_sum, running_area)
    run = OfflineRun.from_totals(n, max_seqs, now, output_len, sums, step)
    stats = Preemption(
        kv_capacity_tokens=kv_tokens,
        peak_demand_tokens=float(min(max_seqs, n) * (input_len + output_len)),
        preemptions=preemptions,
        recomputed_tokens=recomputed,
    )
    return run, stats


def _next_finish(finishes: list[tuple[int, int]], by_id: dict[int, _Cohort]) -> int:
    """The last pass of the running cohort that finishes first (stale heap entries dropped)."""
    while finishes and finishes[0][1] not in by_id:
        heapq.heappop(finishes)
    return finishes[0][0]
