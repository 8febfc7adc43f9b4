"""Layout search: enumerate valid layouts, drop those that do not fit, rank the rest.

Everything that depends on only a few degrees (GEMM times per shape, per-layer costs per
(tp, cp, microbatch, sp, ep), training state per (tp, pp, dp, cp, ep, zero)) is cached in the
ModelContext, so one layout costs a handful of additions. A grid whose training state alone
overflows memory is pruned with all its microbatch/recompute/schedule variants: their memory
can only be larger, so they are counted as evaluated and infeasible without timing them.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field, replace

from .constants import FRAMEWORK_FIXED_BYTES
from .context import ModelContext
from .layout import (
    SEARCHED_RECOMPUTE_MODES,
    Layout,
    LayoutConstraints,
    divisors,
    enumerate_layouts,
    vpp_options,
)
from .memory import MemoryBreakdown, memory_breakdown, state_bytes
from .muon import MUON_ZERO_STAGES
from .step_time import StepBreakdown, step_breakdown


@dataclass(frozen=True, slots=True)
class Candidate:
    layout: Layout
    microbatches: int
    step: StepBreakdown
    memory: MemoryBreakdown

    @property
    def step_time_s(self) -> float:
        return self.step.step_time_s


@dataclass(slots=True)
class SearchOutcome:
    """Best layouts found and what the search looked at."""

    top: list[Candidate] = field(default_factory=list)
    evaluated: int = 0  # layouts decided (timed, or rejected on memory)
    pruned: int = 0  # rejected by the training-state bound without a per-layout evaluation
    timed: int = 0
    feasible: int = 0
    elapsed_s: float = 0.0
    leanest: Candidate | None = None  # smallest memory seen (when nothing fits)


def search(
    ctx: ModelContext,
    cons: LayoutConstraints,
    top_k: int = 6,
    stop_at_first: bool = False,
    headroom: bool = True,
) -> SearchOutcome:
    """Evaluate every layout the constraints allow; keep the top_k fastest that fit.

    A layout fits when its peak leaves the job's memory headroom free (ctx.headroom_bytes);
    with ``headroom=False`` (a layout the user fixed completely) the limit is the capacity."""
    t0 = time.perf_counter()
    job, model = ctx.job, ctx.model
    out = SearchOutcome()
    heap: list[tuple[float, int, Candidate]] = []
    serial = 0
    cap = ctx.capacity_bytes
    if cap is not None and headroom:
        cap = max(cap - ctx.headroom_bytes, 0.0)
    domain = ctx.domain if cons.tp is None else max(ctx.domain, cons.tp)
    rcs = (
        [cons.recompute]
        if cons.recompute
        else list(job.profile.recompute_modes or SEARCHED_RECOMPUTE_MODES)
    )
    # recompute searched: a "full" layout that fits also tries recomputing only as many layers
    # of each stage chunk as memory needs (Megatron's block method)
    try_blocks = cons.recompute is None
    leanest_bytes = float("inf")
    lean_floor: tuple[float, Layout | None, int, int, bool] = (float("inf"), None, 1, 1, False)
    for tp, cp, pp, dp, ep in enumerate_layouts(model, job, cons, domain):
        per_replica = job.global_batch_seqs // dp
        mbs = [cons.microbatch] if cons.microbatch else divisors(per_replica)
        mbs = [b for b in mbs if per_replica % b == 0]
        # ZeRO-2/3 with a pipeline is what FSDP2 + PP runs (torchtitan, Llama 3 §3.3.2): valid
        # when asked for; the search itself keeps Megatron's ZeRO-0/1 for pipelines, whose
        # per-microbatch reduce-scatters are rarely faster
        zeros = [cons.zero] if cons.zero is not None else ([0, 1] if pp > 1 else [0, 1, 2, 3])
        if cons.zero is None:
            zeros = [z for z in zeros if z in job.profile.zero_stages]
            if job.optimizer == "muon":  # whole matrices per rank (muon.py)
                zeros = [z for z in zeros if z in MUON_ZERO_STAGES]
        if cons.hsdp:
            zeros = [3] if 3 in zeros else []
        # (stage, hsdp): HSDP is a ZeRO-3 variant, tried where the DP group spans nodes
        variants = [(z, False) for z in zeros if not cons.hsdp]
        inner = ctx.shard_group(tp, dp, cp, True)
        spans = inner < dp * cp
        # a domain that TP fills holds one member of the DP group: "HSDP" over one GPU shards
        # nothing (ZeRO-0 by another name), so the search does not offer it
        if 3 in zeros and cons.hsdp is not False and (cons.hsdp or (spans and inner > 1)):
            variants.append((3, True))
        sps = [cons.sequence_parallel] if cons.sequence_parallel is not None else [False, True]
        sps = [s for s in sps if tp > 1 or not s]
        vpps = vpp_options(model, pp, cons.vpp)
        n_children = len(mbs) * len(vpps) * len(rcs) * len(sps)
        if n_children == 0:
            continue
        for z, hs in variants:
            etp = cons.etp or 0  # 0: the TP degree (Layout.expert_tp)
            base = Layout(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, zero=z, hsdp=hs, etp=etp)
            st = state_bytes(ctx, base)
            floor_bytes = min(st.total("first"), st.total("last")) + FRAMEWORK_FIXED_BYTES
            if cap is not None and floor_bytes > cap and not stop_at_first:
                out.evaluated += n_children
                out.pruned += n_children
                if floor_bytes < lean_floor[0]:
                    lean_floor = (floor_bytes, base, mbs[0], vpps[0], sps[-1])
                continue
            for mb in mbs:
                m = per_replica // mb
                for v in vpps:
                    if v > 1 and m % pp:
                        continue
                    for rc in rcs:
                        for sp in sps:
                            lay = Layout(
                                tp=tp,
                                pp=pp,
                                dp=dp,
                                cp=cp,
                                ep=ep,
                                vpp=v,
                                microbatch=mb,
                                recompute=rc,
                                zero=z,
                                sequence_parallel=sp,
                                hsdp=hs,
                                etp=etp,
                                recompute_layers=cons.recompute_layers or 0,
                            )
                            out.evaluated += 1
                            mem = memory_breakdown(ctx, lay, m)
                            total = mem.total
                            if cap is not None and total > cap:
                                if total < leanest_bytes:
                                    leanest_bytes = total
                                    out.leanest = Candidate(
                                        lay, m, step_breakdown(ctx, lay, m), mem
                                    )
                                continue
                            fitting = [(lay, mem)]
                            if try_blocks and rc == "full" and cap is not None:
                                block = fewest_recomputed_layers(ctx, lay, m, cap)
                                if block is not None:
                                    out.evaluated += 1
                                    fitting.append(block)
                            for lay, mem in fitting:
                                out.feasible += 1
                                out.timed += 1
                                step = step_breakdown(ctx, lay, m)
                                cand = Candidate(lay, m, step, mem)
                                score = step.step_time_s
                                serial += 1
                                if len(heap) < top_k:
                                    heapq.heappush(heap, (-score, serial, cand))
                                elif score < -heap[0][0]:
                                    heapq.heapreplace(heap, (-score, serial, cand))
                                if stop_at_first:
                                    out.top = [cand]
                                    out.elapsed_s = time.perf_counter() - t0
                                    return out
    out.top = [c for _, _, c in sorted(heap, key=lambda x: (-x[0], x[1]))]
    _, b, mb, v, sp = lean_floor
    if out.leanest is None and b is not None:
        lay = Layout(
            tp=b.tp,
            pp=b.pp,
            dp=b.dp,
            cp=b.cp,
            ep=b.ep,
            vpp=v,
            microbatch=mb,
            recompute="full" if "full" in rcs else rcs[0],
            zero=b.zero,
            sequence_parallel=sp,
            hsdp=b.hsdp,
            etp=b.etp,
        )
        m = job.global_batch_seqs // (b.dp * mb)
        out.leanest = Candidate(lay, m, step_breakdown(ctx, lay, m), memory_breakdown(ctx, lay, m))
    out.elapsed_s = time.perf_counter() - t0
    return out


def fewest_recomputed_layers(
    ctx: ModelContext, lay: Layout, microbatches: int, cap: float
) -> tuple[Layout, MemoryBreakdown] | None:
    """The fitting "full" layout `lay` with as few layers of each stage chunk recomputed as
    memory allows (Megatron --recompute-method block), with its memory; None when every layer
    must be (or the chunk has one layer). Memory falls as layers are recomputed, so the
    fewest that fit are found by bisection."""
    chunk = lay.chunk_layers(ctx.layers)
    if chunk < 2:
        return None
    lo, hi = 1, chunk  # hi: all layers, known to fit
    best: tuple[Layout, MemoryBreakdown] | None = None
    while lo < hi:
        mid = (lo + hi) // 2
        trial = replace(lay, recompute_layers=mid)
        mem = memory_breakdown(ctx, trial, microbatches)
        if mem.total <= cap:
            hi, best = mid, (trial, mem)
        else:
            lo = mid + 1
    return best
