"""``--num-requests N``: an offline batch of N requests that all arrive at once.

This is how offline throughput benchmarks run (``trtllm-bench throughput`` feeds a fixed dataset
at an infinite rate; vLLM's ``benchmark_throughput.py`` likewise) and how a team processes a
fixed set of prompts. The steady state of ``--batch max`` (``batching.py``) is only part of such
a run: the engine first fills its running batch a few prompts per forward pass (its token budget
per pass, ``max_num_tokens``, holds the decode tokens plus whole prompts), and once the queue is
empty the running batch drains over the last output_len passes with fewer and fewer sequences.
When N is not much larger than the concurrency that fits, the ramp and the drain are a large
share of the run; when N is smaller than it, the batch never reaches it.

The run is simulated pass by pass as the engine schedules it (first come first served, whole
prompts admitted while the running batch has room and the pass has token budget, each request
holding its slot for output_len passes), with each pass timed by the same roofline as every other
plan (``planner.decode_phase``/``prefill_phase``). Passes in which nobody joins are advanced in
one jump to the next finish, so the loop runs once per admitted cohort, not once per pass.

With ``--concurrency C`` as well it is the closed-loop benchmark's run from a cold start
(``vllm bench serve --max-concurrency C --num-prompts N``): the client sends C requests, then
one as each finishes, and TTFT and latency count from each send. ``--output-spread S`` spreads
the output lengths over (1 +/- S) x the given one, mean unchanged.

Not modelled: the KV length of a pass is the run's mean (input + output/2), not the exact mix of
the pass; input lengths are all the given one; a preempting run (``preemption.py``) has equal
output lengths.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.plan.infer.phases import decode_phase, prefill_phase

#: Rows of the largest GEMM row tile the shape model picks (plan.gemm: 64 x N and 128 x N
#: tiles): pass times are interpolated between the two ends of a tile of this many rows.
TILE_ROWS = 64
#: Geometric grid of the prompt-token counts of chunked passes (2% apart).
PROMPT_GRID_RATIO = 1.02

StepTime = Callable[[int, int], float]


@dataclass(frozen=True, slots=True)
class OfflineRun:
    """What one replica does with its share of an offline batch."""

    num_requests: int
    concurrency: int  # most sequences running at once (the cap, or fewer requests)
    makespan_s: float  # first arrival to last token
    output_tokens: int
    mean_ttft_s: float  # including the wait in the queue
    mean_tpot_s: float
    mean_latency_s: float
    mean_running: float  # time-weighted sequences in the decode batch
    passes: int
    #: mean time a request waited from the run's start until its client sent it (0 when every
    #: request is sent at once; a closed-loop client with a window sends one as one finishes)
    mean_send_s: float = 0.0

    @classmethod
    def from_totals(
        cls,
        num_requests: int,
        concurrency: int,
        makespan_s: float,
        output_len: int,
        sums: tuple[float, float, float, float],
        passes: int,
        send_sum: float = 0.0,
    ) -> OfflineRun:
        """The run from a simulation's running sums: (TTFT, TPOT, latency) summed over requests
        and the time integral of the decode batch; `send_sum` sums the times requests were sent."""
        ttft_sum, tpot_sum, latency_sum, running_area = sums
        n = num_requests
        return cls(
            num_requests=n,
            concurrency=min(concurrency, n),
            makespan_s=makespan_s,
            output_tokens=n * output_len,
            mean_ttft_s=ttft_sum / n,
            mean_tpot_s=tpot_sum / n if output_len > 1 else 0.0,
            mean_latency_s=latency_sum / n,
            mean_running=running_area / makespan_s if makespan_s > 0 else 0.0,
            passes=passes,
            mean_send_s=send_sum / n,
        )

    @property
    def mean_ttft_from_send_s(self) -> float:
        """TTFT as a client that sends each request when a slot of its window frees measures
        it: from the send, not from the run's start."""
        return self.mean_ttft_s - self.mean_send_s

    @property
    def mean_latency_from_send_s(self) -> float:
        return self.mean_latency_s - self.mean_send_s

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.makespan_s if self.makespan_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_requests": self.num_requests,
            "concurrency": self.concurrency,
            "makespan_s": self.makespan_s,
            "output_tokens": self.output_tokens,
            "output_tokens_per_s": self.output_tokens_per_s,
            "mean_ttft_s": self.mean_ttft_s,
            "mean_tpot_s": self.mean_tpot_s,
            "mean_latency_s": self.mean_latency_s,
            "mean_running": self.mean_running,
            "forward_passes": self.passes,
            "mean_send_s": self.mean_send_s,
            "mean_ttft_from_send_s": self.mean_ttft_from_send_s,
        }


def require_positive(**values: int) -> None:
    """One-line error for the first simulation size below 1."""
    for name, value in values.items():
        if value < 1:
            raise FlopwiseError(f"offline batch: {name} must be >= 1, got {value}")


def simulate(
    step_time: StepTime,
    num_requests: int,
    concurrency: int,
    input_len: int,
    output_len: int,
    token_budget: int,
    client_window: int | None = None,
    output_spread: float = 0.0,
    poll_steps: int = 1,
) -> OfflineRun:
    """Run `num_requests` requests of fixed lengths through an in-flight-batching engine.

    `step_time(decoding, prompt_tokens)` is the time of one forward pass that decodes one token
    for each of `decoding` sequences and prefills `prompt_tokens` prompt tokens. A pass holds at
    most `token_budget` tokens (one per decoding sequence plus prompt tokens). Whole prompts
    join while fewer than `concurrency` requests hold KV and the pass has room for them; a
    prompt longer than the room a pass can give is prefilled in chunks over several passes
    (chunked prefill). A request's first token comes out of the pass that ends its prompt; it
    then decodes output_len - 1 more passes and leaves.

    `client_window` is a closed-loop client's requests in flight (``vllm bench serve
    --max-concurrency``): it sends that many at the start and one more as each finishes, and
    the run records when each was sent (OfflineRun.mean_send_s). None: all are sent at once.
    The engine admits from what was sent, so the window also caps the running batch.

    `output_spread` s > 0 gives the requests output lengths spread evenly over
    [(1 - s), (1 + s)] x output_len in the order they join (a low-discrepancy sequence, so
    the run is deterministic and the mean stays output_len): random-length benchmarks
    (``--random-range-ratio``), whose requests finish, and so are replaced, at different times.

    `poll_steps` N > 1 (with `client_window`): the scheduler looks at newly sent requests only
    every N decode passes (SGLang ``--scheduler-recv-interval`` / ``--num-continuous-decode-steps``:
    ``online.poll_wait_s``); after a pass with prompt tokens, or when nothing decodes, it looks at
    the next pass. A request sent mid-way waits, decoding the others, for that look.
    """
    if not 0.0 <= output_spread < 1.0:
        raise FlopwiseError(f"output spread must be in [0, 1), got {output_spread!r}")
    if client_window is not None:
        require_positive(client_window=client_window)
        concurrency = min(concurrency, client_window)
    require_positive(
        num_requests=num_requests,
        concurrency=concurrency,
        input_len=input_len,
        output_len=output_len,
        token_budget=token_budget,
    )
    queue, active, step, now = num_requests, 0, 0, 0.0
    chunk_left = 0  # prompt tokens still to prefill of the one request being chunked
    # (last pass index, order, count, first token s, output length), soonest last pass first
    cohorts: list[tuple[int, int, int, float, int]] = []
    joined = 0  # requests that have joined, for the output-length sequence
    ttft_sum = tpot_sum = latency_sum = running_area = 0.0
    finishes: list[tuple[int, float]] = []  # (requests, time) as they finish, in time order
    poll = max(1, poll_steps) if client_window is not None else 1
    since_look = poll  # decode passes since the scheduler last looked at new requests
    finished = received = 0
    while queue or active or chunk_left:
        sent = num_requests
        if client_window is not None:
            sent = min(num_requests, client_window + finished)
        if since_look >= poll or active == 0:
            since_look, received = 0, sent
        inbox = received - (num_requests - queue)  # received, not yet admitted
        room = token_budget - active
        prompt_tokens = ready = 0
        if room > 0 and chunk_left:
            take = min(chunk_left, room)
            chunk_left -= take
            prompt_tokens, room = take, room - take
            ready = 0 if chunk_left else 1
        slots = concurrency - active - ready - (1 if chunk_left else 0)
        if room > 0 and inbox > 0 and slots > 0 and not chunk_left:
            whole = min(room // input_len, inbox, slots)
            queue -= whole
            ready += whole
            prompt_tokens += whole * input_len
            if whole == 0 and prompt_tokens == 0:
                # a prompt longer than any pass can hold: chunked over several passes
                queue -= 1
                prompt_tokens, chunk_left = room, input_len - room
        if prompt_tokens:
            dt = step_time(active, prompt_tokens)
            now += dt
            running_area += active * dt
            ttft_sum += ready * now
            if output_len == 1:
                latency_sum += ready * now
                finishes.append((ready, now))
                finished += ready
            elif ready:
                for n, out in _output_lengths(joined, ready, output_len, output_spread):
                    heapq.heappush(cohorts, (step + out - 1, joined, n, now, out))
                    joined += n
                active += ready
            step += 1
            since_look = poll  # a pass with prompt tokens: the scheduler looks at the next
        elif cohorts:
            # nobody can join before the oldest cohort leaves (or, with requests sent but not
            # yet seen, before the scheduler's next look): run the passes up to then
            passes = cohorts[0][0] - step + 1
            if sent > received:
                passes = min(passes, poll - since_look)
            dt = step_time(active, 0)
            now += passes * dt
            running_area += active * passes * dt
            step += passes
            since_look = (since_look + passes - 1) % poll + 1
        else:  # pragma: no cover - a pass always has room when nothing decodes
            raise FlopwiseError("offline batch: the engine cannot make progress")
        while cohorts and cohorts[0][0] < step:
            _, _, count, first, out = heapq.heappop(cohorts)
            active -= count
            latency_sum += count * now
            tpot_sum += count * (now - first) / max(out - 1, 1)
            finishes.append((count, now))
            finished += count
    unsent = 0 if client_window is None else max(0, num_requests - client_window)
    send_sum = _send_times_sum(finishes, unsent)
    sums = (ttft_sum, tpot_sum, latency_sum, running_area)
    return OfflineRun.from_totals(
        num_requests, concurrency, now, output_len, sums, step, send_sum=send_sum
    )


def _send_times_sum(finishes: list[tuple[int, float]], unsent: int) -> float:
    """Sum of the send times of the requests a closed-loop client holds back: each request
    that finishes frees a slot of its window, which sends the next, until `unsent` are sent."""
    total = 0.0
    for count, t in finishes:
        if unsent <= 0:
            break
        sent = min(count, unsent)
        unsent -= sent
        total += sent * t
    return total


#: Golden-ratio step of the output-length sequence (evenly spread for any prefix of it).
_GOLDEN = (5**0.5 - 1) / 2


def _output_lengths(first: int, count: int, mean: int, spread: float) -> list[tuple[int, int]]:
    """(count, length) of the output lengths of requests first .. first + count - 1: all `mean`
    without a spread, else evenly spread over [(1 - spread), (1 + spread)] x mean."""
    if spread <= 0.0 or mean <= 1:
        return [(count, mean)]
    lengths: dict[int, int] = {}
    for j in range(first, first + count):
        u = (j * _GOLDEN) % 1.0
        out = max(2, round(mean * (1.0 - spread + 2.0 * spread * u)))
        lengths[out] = lengths.get(out, 0) + 1
    return [(n, out) for out, n in lengths.items()]


def grid_interpolated(exact: StepTime, exact_prompt_unit: int = 1) -> StepTime:
    """`exact` evaluated at a few anchor batches, linearly interpolated in between (and cached),
    so a run of thousands of passes needs a few dozen roofline evaluations.

    A pass's GEMMs have M = decoding + prompt tokens rows, and the roofline's GEMM time steps up
    at every whole row tile (``plan.gemm``: at most TILE_ROWS rows) and is linear within one. The
    anchors of a batch are the two ends of its row tile, so the interpolation is exact for the
    GEMMs and for everything linear in the batch. Prompt-token counts that are not whole prompts
    (chunks of a long prompt) are snapped to a 2% geometric grid.
    """
    cache: dict[tuple[int, int], float] = {}

    def at(b: int, p: int) -> float:
        key = (b, p)
        if key not in cache:
            cache[key] = exact(b, p)
        return cache[key]

    def timed(b: int, p: int) -> float:
        if p % exact_prompt_unit:
            p = round(PROMPT_GRID_RATIO ** round(math.log(p) / math.log(PROMPT_GRID_RATIO)))
        if b <= TILE_ROWS:
            return at(b, p)
        lo = b - (b + p - 1) % TILE_ROWS  # (lo + p) is the first row of b's tile
        hi = lo + TILE_ROWS - 1  # ... and (hi + p) its last
        if lo == hi or lo < 1:
            return at(b, p)
        w = (b - lo) / (hi - lo)
        return (1 - w) * at(lo, p) + w * at(hi, p)

    return timed


def pass_time(ctx: Any) -> StepTime:
    """The roofline time of one mixed pass of this deployment (one replica), grid-cached."""
    isl = ctx.job.input_len

    def exact(decoding: int, prompt_tokens: int) -> float:
        if decoding == 0:
            return prefill_phase(ctx, prompt_tokens / isl).time_s
        return decode_phase(ctx, decoding, prefill_per_step=prompt_tokens).time_s

    return grid_interpolated(exact, isl)


def plan_offline(ctx: Any, num_requests: int, client_window: int | None = None) -> Any:
    """The InferPlan of an offline batch of `num_requests` (split evenly over the replicas).

    With `client_window` it is a closed-loop benchmark run instead (``vllm bench serve
    --max-concurrency C --num-prompts N``, SGLang's ``bench_serving``, AIPerf): a client keeps
    that many requests in flight from a cold start, sending the next as one finishes, and times
    each request from its send; the first window arrives at once, so its prompts queue behind
    one another, and the waves it starts persist while the lengths are equal.
    """

    from flopwise.plan.infer.batching import (
        continuous_memory,
        continuous_plan,
        kv_tokens_held,
        max_concurrency,
        sized_context,
    )
    from flopwise.plan.infer.planner import fit_suggestion

    ctx, build = sized_context(ctx)  # the engine as its builder sizes it (trtllm_build.py)
    job = ctx.job
    per_replica = math.ceil(num_requests / job.replicas)
    if (
        job.batch is not None
        and ctx.engine.max_num_seqs is not None
        and job.batch > ctx.engine.max_num_seqs
    ):
        # an explicit --batch is the engine's sequence cap (vLLM --max-num-seqs, TensorRT-LLM
        # max_batch_size, SGLang --max-running-requests): only memory limits it then
        ctx = replace(ctx, engine=replace(ctx.engine, max_num_seqs=job.batch))
    fit = max_concurrency(ctx)
    if fit < 1:
        raise FlopwiseError(fit_suggestion(ctx.spec, ctx.hw, job))
    cap = fit if job.batch is None else min(job.batch, fit)
    budget = ctx.engine.max_num_tokens or (cap + job.input_len)
    window = None if client_window is None else math.ceil(client_window / job.replicas)
    run, preempted = _run(ctx, per_replica, cap, max(budget, 1), window)
    running = max(1.0, run.mean_running)
    step = decode_phase(ctx, running, prefill_per_step=running * job.input_len / job.output_len)
    total_tokens = num_requests * job.output_len  # every replica is done by the makespan
    capped = (
        f" (--batch {job.batch} asked, {fit} fit)" if job.batch is not None and job.batch > fit
        else ""
    )  # fmt: skip
    cost = None
    if job.price_per_gpu_hour is not None:
        cost = job.price_per_gpu_hour * job.gpus * run.makespan_s / 3600.0
    offline: dict[str, Any] = {**run.to_dict(), "cost_usd": cost}
    if window is not None:
        offline["client_window"] = window
    if preempted is not None:
        offline["preemption"] = preempted.to_dict()
    return continuous_plan(
        ctx,
        build,
        mode="offline",
        batch=run.concurrency,
        ttft_s=run.mean_ttft_from_send_s,  # = mean_ttft_s when all are sent at the start
        tpot_s=run.mean_tpot_s if job.output_len > 1 else step.time_s,
        e2e_latency_s=run.mean_latency_from_send_s,
        output_tokens_per_s=total_tokens / run.makespan_s if run.makespan_s > 0 else 0.0,
        # a preempting run admits more than fit at once; the memory plan holds what fits
        memory=replace(continuous_memory(ctx, min(run.concurrency, cap)), max_batch=fit),
        decode=step,
        running=running,
        request_s=job.output_len * step.time_s,
        notes=(
            _run_note(num_requests, per_replica, job.replicas, window)
            + (
                f"; the scheduler looks at the client's new requests every "
                f"{job.scheduler_poll_steps} decode steps"
                if window is not None and job.scheduler_poll_steps > 1
                else ""
            )
            + f"; at most {run.concurrency:,} run at once{capped}, each holding "
            f"{kv_tokens_held(ctx):,.0f} tokens of KV; prompts join while a pass has room within "
            f"{budget:,} tokens; {run.mean_running:,.0f} decode on average over the run "
            "(ramp-up and drain included); "
            + (
                "TTFT and latency include the wait in the queue"
                if window is None
                else "TTFT and latency from each request's send, including its wait in the engine"
            ),
        ),
        extras={"offline": offline},
        closing_notes=_preemption_note(preempted, job.output_spread),
    )


def _run_note(num_requests: int, per_replica: int, replicas: int, window: int | None) -> str:
    spread = f", {per_replica:,} on each of {replicas} replicas" if replicas > 1 else ""
    if window is None:
        return f"offline batch: {num_requests:,} requests arrive at once{spread}"
    return (
        f"closed-loop run from a cold start: {num_requests:,} requests{spread}, a client keeping "
        f"{window:,} in flight per replica (the first {window:,} sent at once, the next as one "
        "finishes)"
    )


def _run(
    ctx: Any, per_replica: int, cap: int, budget: int, window: int | None = None
) -> tuple[OfflineRun, Any]:
    """The replica's run, and what preemption cost it (None: no preemption can happen).

    An engine that admits on the prompt and preempts by recompute (vLLM) runs every request it
    is allowed at once (--batch / its max_num_seqs); when they would outgrow its KV pool at their
    full length it is simulated with preemption (``preemption.py``), else as below. A closed-loop
    client's window (`window`) is simulated without preemption: the engine runs what fits.
    """
    from flopwise.plan.infer.preemption import (
        RECOMPUTE,
        kv_capacity_tokens,
        simulate_preempting,
    )

    job = ctx.job
    step_time = pass_time(ctx)
    if window is not None:
        run = simulate(
            step_time, per_replica, cap, job.input_len, job.output_len, budget,
            client_window=window, output_spread=job.output_spread,
            poll_steps=job.scheduler_poll_steps,
        )  # fmt: skip
        return run, None
    if ctx.engine.preemption == RECOMPUTE:
        allowed = job.batch if job.batch is not None else ctx.engine.max_num_seqs
        seqs = min(per_replica, allowed or per_replica)
        kv = kv_capacity_tokens(ctx, seqs)
        if kv is not None and seqs * (job.input_len + job.output_len) > kv:
            return simulate_preempting(
                step_time, per_replica, seqs, job.input_len, job.output_len, budget, kv
            )
    run = simulate(
        step_time, per_replica, cap, job.input_len, job.output_len, budget,
        output_spread=job.output_spread,
    )  # fmt: skip
    return run, None


def _preemption_note(p: Any, output_spread: float = 0.0) -> tuple[str, ...]:
    if p is None:
        return ()
    spread = (
        f"; the preempting run is simulated with equal output lengths (--output-spread "
        f"{output_spread:g} not applied)"
        if output_spread
        else ""
    )
    return (
        f"KV pool of {p.kv_capacity_tokens:,.0f} tokens per replica < {p.peak_demand_tokens:,.0f}"
        f" at full length: {p.preemptions:,} preemptions by recompute re-prefill "
        f"{p.recomputed_tokens:,} tokens (the engine admits on the prompt and preempts the "
        f"newest request when a step's KV slots cannot be allocated){spread}",
    )
