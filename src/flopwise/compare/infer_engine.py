"""Serving one job on every candidate: replicas of tp x pp GPUs inside an instance, at the same
batch on every offer, at each offer's largest batch (`--batch max`, stated), or at each offer's
largest batch within a latency target (`--target-tpot-ms` / `--target-ttft-ms`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from flopwise.compare import planners
from flopwise.compare.candidates import Candidate
from flopwise.compare.jobs import CompareInferJob
from flopwise.compare.network import network_check
from flopwise.compare.rows import INFER_INTERVALS, _interval, price_date, scaled_interval
from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.plan.infer.online import busy_replicas
from flopwise.units import SECONDS_PER_HOUR
from flopwise.workload.spec import ModelSpec

#: Inference replicas are tensor-parallel groups inside one instance: these TP degrees are tried,
#: smallest first; without a latency target the first that fits is used (TP across instances is
#: not offered); with one, the group that serves the most tokens per instance within it.
INFER_TP_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)


def _excluded(c: Candidate, reason: str) -> dict[str, Any]:
    return {**c.to_dict(), "reason": reason}


def _meets(est: dict[str, Any], job: CompareInferJob) -> bool:
    if job.target_tpot_ms is not None and est["tpot_ms"] > job.target_tpot_ms:
        return False
    return not (job.target_ttft_ms is not None and est["ttft_ms"] > job.target_ttft_ms)


def _best_under_target(
    plan: Callable[[int | None], dict[str, Any]], job: CompareInferJob
) -> dict[str, Any]:
    """The largest batch whose plan fits and meets the latency target (bisection: time per
    token and time to first token grow with the batch)."""
    top = plan(None)  # the largest batch that fits
    hi = int(top["batch"])
    if _meets(top, job):
        return top
    first = plan(1)
    if first["fits"] is False or not _meets(first, job):
        raise FlopwiseError(
            f"misses the target even at batch 1 (TTFT {first['ttft_ms']:.0f} ms, TPOT "
            f"{first['tpot_ms']:.1f} ms)"
        )
    lo, best = 1, first
    while hi - lo > 1:
        mid = (lo + hi) // 2
        e = plan(mid)
        if e["fits"] is not False and _meets(e, job):
            lo, best = mid, e
        else:
            hi = mid
    return best


def infer_rows(
    model: ModelSpec,
    job: CompareInferJob,
    candidates: Sequence[Candidate],
    hardware: Callable[[Candidate], Hardware],
    memo: Any,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, Hardware]]:
    rows: list[dict[str, Any]] = []
    excluded: list[dict[str, Any]] = []
    hw_by_row: dict[int, Hardware] = {}
    targeted = job.target_tpot_ms is not None or job.target_ttft_ms is not None
    for c in candidates:
        groups = [job.tp * job.pp] if job.tp is not None else [t * job.pp for t in INFER_TP_SIZES]
        tried = [g for g in groups if g <= c.gpus_per_instance and c.gpus_per_instance % g == 0]
        est = None
        reason = (
            f"a replica of tp x pp = {groups[0]} GPUs does not divide a "
            f"{c.gpus_per_instance}-GPU instance"
        )
        try:
            hw = hardware(c)
            hw, net = network_check(hw, c.network_gbit_s, c.gpus_per_instance, 1)
        except FlopwiseError as exc:
            excluded.append(_excluded(c, str(exc)))
            continue
        best_rate = -1.0
        for group in tried:
            # an offline batch and an online load are split over the instance's replicas
            replicas = c.gpus_per_instance // group
            share = None if job.num_requests is None else -(-job.num_requests // replicas)
            flight = None if job.concurrency is None else -(-job.concurrency // replicas)
            rate = None if job.request_rate is None else job.request_rate / replicas

            def plan(
                batch: int | None,
                group: int = group,
                hw: Hardware = hw,
                share: int | None = share,
                flight: int | None = flight,
                rate: float | None = rate,
            ) -> dict[str, Any]:
                j = replace(
                    job, batch=batch, num_requests=share, concurrency=flight, request_rate=rate
                )
                key = ("batch", batch, share, flight, rate)
                return memo(planners.infer_estimate, model, hw, group, j, key)

            try:
                e = _best_under_target(plan, job) if targeted else plan(job.batch)
                if job.concurrency is not None:  # fewer requests than replicas leave some idle
                    e = {**e, "busy_replicas": busy_replicas(job.concurrency, replicas)}
            except FlopwiseError as exc:  # e.g. nothing fits at batch max, or tp splits no heads
                reason = f"{group} GPUs per replica: {exc}"
                continue
            if e["fits"] is False:
                reason = (
                    f"does not fit in {c.gpus_per_instance} x {c.accelerator}: "
                    f"{e['memory_per_gpu_gib']:.1f} GiB per GPU needed with {group} GPUs per "
                    f"replica, {e['device_memory_gib'] or 0:.1f} GiB on the device"
                )
                continue
            if not targeted:
                est = e
                break
            rate = e["output_tokens_per_s"] * (c.gpus_per_instance // group)
            if rate > best_rate:
                est, best_rate = e, rate
        if est is None:
            excluded.append(_excluded(c, reason))
            continue
        row = _row(c, est, net, hw)
        hw_by_row[id(row)] = hw
        rows.append(row)
    return rows, excluded, hw_by_row


def _row(c: Candidate, est: dict[str, Any], net: dict[str, Any], hw: Hardware) -> dict[str, Any]:
    replica = int(est["layout"]["tp"]) * int(est["layout"]["pp"])
    replicas = c.gpus_per_instance // replica
    tokens_per_s = est["output_tokens_per_s"] * est.get("busy_replicas", replicas)
    cost = None
    if c.price_per_hour is not None and tokens_per_s:
        cost = c.price_per_hour / (tokens_per_s * SECONDS_PER_HOUR) * 1e6
    label, age, stale = price_date(c.price_published, c.price_kind)
    plan = est.get("plan") or {}
    layout = est["layout"]
    return {
        **c.to_dict(),
        "price_date": label,
        "price_age_days": age,
        "price_stale": stale,
        "kind": "infer",
        "gpus": c.gpus_per_instance,
        "gpus_requested": c.gpus_per_instance,
        "instances": 1,
        "gpus_billed": c.gpus_per_instance,
        "chips_note": None,
        "gpus_per_replica": replica,
        "replicas": replicas,
        "ran": (
            _load_text(est, replicas) + f", tp{layout['tp']} pp{layout['pp']}, {replicas} "
            f"replica{'s' if replicas > 1 else ''} on {c.gpus_per_instance} GPUs"
        ),
        "method": est["method"],
        "batch": est["batch"],
        "ttft_ms": est["ttft_ms"],
        "tpot_ms": est["tpot_ms"],
        "e2e_latency_s": est["e2e_latency_s"],
        "output_tokens_per_s": tokens_per_s,
        "cost_per_million_output_tokens": cost,
        "memory_per_gpu_gib": est["memory_per_gpu_gib"],
        "device_memory_gib": est["device_memory_gib"],
        "fits": est["fits"],
        "layout": layout,
        "breakdown": est["breakdown"],
        "memory_breakdown": est["memory_breakdown"],
        "network": net,
        "measured": sorted(k for k, o in hw.origins.items() if o.kind == "measured"),
        "hardware_sources": {k: f"{o.kind}: {o.detail}" for k, o in hw.origins.items()},
        **{k: _interval(plan.get(k)) for k in INFER_INTERVALS},
        "output_tokens_per_s_interval": scaled_interval(
            plan.get("output_tokens_per_s_interval"), float(est.get("busy_replicas", replicas))
        ),
        **_online_ranges(est, plan, cost),
        **_offline(est.get("offline"), c.price_per_hour, tokens_per_s, est),
        "_plan": plan,
    }


def _load_text(est: dict[str, Any], replicas: int) -> str:
    """What each replica ran: its batch, or its online load and how much of it ran at once."""
    arrivals = est.get("arrivals")
    if arrivals:
        return (
            f"{arrivals['replica_rate_per_s']:.3g} requests/s per replica, "
            f"{arrivals['mean_running']:,.1f} running on average"
        )
    online = est.get("online")
    if not online:
        return f"batch {est['batch']} per replica"
    queued = online["concurrency"] - online["running"] if online["queue_wait_ms"] else 0
    busy = est.get("busy_replicas", replicas)
    idle = f" ({busy:,.0f} of {replicas} replicas busy)" if busy < replicas else ""
    return (
        f"{online['concurrency']:,} in flight per replica{idle}, {online['running']:,} running"
        + (f", {queued:,} queued" if queued else "")
    )


def _online_ranges(
    est: dict[str, Any], plan: dict[str, Any], cost: float | None
) -> dict[str, tuple[float, float] | None]:
    """80% ranges of the two numbers a comparison ranks on, from the plan's own intervals.

    Cost per million output tokens is price over throughput, so its range is the inverse of
    the tokens/s range. End-to-end latency is the first token plus the decode that follows:
    the prefill part moves with the TTFT interval and the decode part with the TPOT interval
    (both come from the same residuals, so their ends are taken together). None where the
    plan gives no interval.
    """
    tok = _interval(plan.get("output_tokens_per_s_interval"))
    rate = float(est["output_tokens_per_s"] or 0.0)
    cost_iv = None
    if cost is not None and tok is not None and rate > 0 and tok[0] > 0:
        cost_iv = (cost * rate / tok[1], cost * rate / tok[0])
    ttft_iv = _interval(plan.get("ttft_ms_interval"))
    tpot_iv = _interval(plan.get("tpot_ms_interval"))
    e2e_iv = None
    ttft_ms = est.get("ttft_ms")
    tpot = est.get("tpot_ms")
    e2e = est.get("e2e_latency_s")
    if ttft_iv and tpot_iv and ttft_ms is not None and tpot and e2e is not None:
        first = float(ttft_ms) / 1e3
        decode = max(0.0, float(e2e) - first)
        e2e_iv = (
            ttft_iv[0] / 1e3 + decode * tpot_iv[0] / float(tpot),
            ttft_iv[1] / 1e3 + decode * tpot_iv[1] / float(tpot),
        )
    return {
        "cost_per_million_output_tokens_interval": cost_iv,
        "e2e_latency_s_interval": e2e_iv,
    }


def _offline(
    run: dict[str, Any] | None,
    price_per_hour: float | None,
    tokens_per_s: float,
    est: dict[str, Any],
) -> dict[str, Any]:
    """An offline batch's makespan and cost on the whole instance, with their 80% ranges (the
    inverse of the throughput range: the batch's tokens are fixed)."""
    if not run:
        return {}
    span = float(run["makespan_s"])
    cost = None if price_per_hour is None else price_per_hour * span / SECONDS_PER_HOUR
    iv = _interval((est.get("plan") or {}).get("output_tokens_per_s_interval"))
    rate = est["output_tokens_per_s"]
    span_iv = None if iv is None or not rate else (span * rate / iv[1], span * rate / iv[0])
    return {
        "num_requests": run["num_requests"],
        "makespan_s": span,
        "makespan_s_interval": span_iv,
        "batch_cost_usd": cost,
        "batch_cost_usd_interval": (
            None
            if span_iv is None or price_per_hour is None
            else tuple(price_per_hour * x / SECONDS_PER_HOUR for x in span_iv)
        ),
        "mean_running": run["mean_running"],
    }
