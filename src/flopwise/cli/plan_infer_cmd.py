"""`flopwise plan infer`: latency, throughput, memory and cost of serving a model."""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli.job_args import add_job_args, job_command


def register(psub: Any) -> None:
    p = psub.add_parser(
        "infer",
        help="inference latency, throughput, memory and cost",
        description="Plan LLM inference: prefill and decode per layer at the roofline of each "
        "op, KV cache, batching, quantization, speculative decoding. Exit 1 when the "
        "deployment does not fit in memory (the plan is still shown, led by 'does not fit').",
    )
    add_job_args(p, "infer", "plan")
    p.set_defaults(func=job_command(run))


def run(args: argparse.Namespace) -> int:
    from flopwise.hardware import hardware_for
    from flopwise.plan.infer import InferJob, plan_inference, resolve_layout
    from flopwise.workload.hf import load_model

    model = load_model(args.model)
    hw = hardware_for(args.accelerator, args.system, args.measured, args.db)
    tp, pp, replicas = resolve_layout(hw, args.gpus, args.tp, args.pp)
    if args.tp is not None:
        from flopwise.plan.infer.job import check_tensor_parallel

        check_tensor_parallel(model, tp)
    levels = args.concurrency if isinstance(args.concurrency, tuple) else None
    rates = args.request_rate if isinstance(args.request_rate, tuple) else None
    job = InferJob(
        input_len=args.input_len,
        output_len=args.output_len,
        batch=resolve_batch(args.batch, args.num_requests, args.concurrency, args.request_rate),
        tp=tp,
        pp=pp,
        replicas=replicas,
        weight_dtype=args.weight_dtype,
        kv_dtype=args.kv_dtype,
        act_dtype=args.activation_dtype,
        engine=args.engine,
        price_per_gpu_hour=args.price_per_gpu_hour,
        ep=args.ep,
        attention_dp=args.attention_dp,
        num_requests=args.num_requests,
        concurrency=levels[0] if levels else args.concurrency,
        request_rate=rates[0] if rates else args.request_rate,
        memory_fraction=args.memory_fraction,
        engine_max_batch=args.engine_max_batch,
        engine_max_tokens=args.engine_max_tokens,
        allow_long_context=args.allow_long_context,
        fp8_context_attention=args.fp8_context_attention,
        prefill_cuda_graphs=args.prefill_cuda_graphs,
        decode_kernel=args.decode_kernel,
        cuda_graph_batch_sizes=args.cuda_graph_batch_sizes or (),
        output_spread=args.output_spread or 0.0,
        scheduler_poll_steps=args.scheduler_poll_steps or 1,
    )
    hw_doc = {
        "id": hw.id,
        "name": hw.name,
        "origins": {k: v.to_dict() for k, v in hw.origins.items()},
    }
    if args.sweep:
        from flopwise.plan.infer.sweep import sweep_batches

        points = sweep_batches(model, hw, job)
        doc: dict[str, Any] = {
            "model": model.name,
            "accelerator": hw.id,
            "job": job.to_dict(),
            "points": [pt.to_dict() for pt in points],
        }
        _emit(args, doc, "sweep")
        return 0
    if args.target_tpot_ms is not None:
        from flopwise.plan.infer.target import plan_for_target_tpot

        target = plan_for_target_tpot(model, hw, job, args.target_tpot_ms / 1e3)
        doc = {"model": model.name, "accelerator": hw.id, **target.to_dict()}
        _emit(args, doc, "target")
        return 0
    draft = None
    if args.draft:
        from flopwise.plan.infer.speculative import DraftConfig

        draft = DraftConfig(
            model=load_model(args.draft), acceptance=args.acceptance, tokens=args.draft_tokens
        )
    if rates is not None:
        from flopwise.plan.infer.arrivals import plan_rate_sweep

        swept = plan_rate_sweep(model, hw, job, rates, draft=draft)
        doc = {
            "model": model.name,
            "accelerator": hw.id,
            "mode": "rate-sweep",
            "job": {**job.to_dict(), "request_rate": sorted(rates)},
            "points": [_sweep_point(p.to_dict(), "request_rate") for p in swept.plans],
            "refused_rate_per_s": swept.refused_rate_per_s,
            "max_rate_per_s": swept.max_rate_per_s,
            "refused": swept.reason or None,
            "hardware": hw_doc,
        }
        _emit(args, doc, "rate_sweep")
        return 0
    if levels is not None:
        from flopwise.plan.infer.online import plan_online_sweep

        plans = plan_online_sweep(model, hw, job, levels, draft=draft)
        doc = {
            "model": model.name,
            "accelerator": hw.id,
            "mode": "online-sweep",
            "job": {**job.to_dict(), "concurrency": list(levels)},
            "points": [_sweep_point(p.to_dict(), "concurrency") for p in plans],
            "hardware": hw_doc,
        }
        _emit(args, doc, "online_sweep")
        return 0
    plan = plan_inference(model, hw, job, draft=draft)
    doc = {**plan.to_dict(), "hardware": hw_doc}
    _emit(args, doc, "plan")
    from flopwise.cli._fit import EXIT_DOES_NOT_FIT

    return EXIT_DOES_NOT_FIT if doc.get("fits") is False else 0


def resolve_batch(
    batch: int | str | None,
    num_requests: int | None,
    concurrency: Any = None,
    request_rate: float | None = None,
) -> int | None:
    """--batch: 'max' is None; not given is 1 for one request at a time, 'max' for an offline
    batch or online serving (--num-requests / --concurrency / --request-rate: as many running
    at once as fit)."""
    modes = (num_requests, concurrency, request_rate)
    if batch == "max" or (batch is None and any(m is not None for m in modes)):
        return None
    return 1 if batch is None else int(batch)


#: What each point of a concurrency or request-rate sweep keeps of its plan (the whole plan is
#: one run away).
_POINT_KEYS = (
    "batch",
    "ttft_ms",
    "tpot_ms",
    "e2e_latency_s",
    "output_tokens_per_s",
    "tokens_per_s_per_user",
    "memory_per_gpu_gib",
    "fits",
    "mbu",
    "mfu",
    "cost_per_million_output_tokens",
    "ttft_ms_interval",
    "tpot_ms_interval",
    "output_tokens_per_s_interval",
)


def _sweep_point(plan: dict[str, Any], level: str) -> dict[str, Any]:
    """One point of a concurrency or request-rate sweep: its level (the job's `level`), what
    _POINT_KEYS keeps of the plan, and the plan's load block (online / arrivals)."""
    block = "online" if level == "concurrency" else "arrivals"
    return {level: plan["job"][level], **{k: plan.get(k) for k in _POINT_KEYS}, block: plan[block]}


def _emit(args: argparse.Namespace, doc: dict[str, Any], kind: str) -> None:
    if args.json:
        from flopwise.present.jsonout import emit

        emit(doc)
        return
    from flopwise.present import infer_view

    {
        "plan": infer_view.show_plan,
        "sweep": infer_view.show_sweep,
        "target": infer_view.show_target,
        "online_sweep": infer_view.show_online_sweep,
        "rate_sweep": infer_view.show_rate_sweep,
    }[kind](doc)
