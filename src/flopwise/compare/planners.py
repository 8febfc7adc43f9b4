"""The narrow seam between the comparison and the planners.

The comparison asks two questions of a planner and reads a fixed set of keys back, so swapping
planners touches only this module:

- ``train_estimate(model, hw, gpus, job)`` -> ``method, step_time_s, mfu, train_days, gpu_hours,
  memory_per_gpu_gib, device_memory_gib, fits, why_not, layout, breakdown, memory_breakdown,
  plan``
- ``infer_estimate(model, hw, gpus, job)`` (one replica of `gpus` GPUs) -> ``method, ttft_ms,
  tpot_ms, e2e_latency_s, output_tokens_per_s, memory_per_gpu_gib, device_memory_gib, fits,
  batch, layout, breakdown, memory_breakdown, plan``

Training: flopwise.plan.train.plan_training (or, with an assumed MFU, the first-order estimate,
as `plan train --mfu`). Inference: flopwise.plan.infer.plan_inference.

A planner that cannot run the job raises FlopwiseError; the comparison lists the reason.
"""

from __future__ import annotations

from typing import Any

from flopwise.compare.jobs import CompareInferJob, CompareTrainJob
from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware
from flopwise.workload.spec import ModelSpec

#: Memory components of a training plan the report charts (totals and capacity left out).
_TRAIN_MEMORY_SKIP = ("total_gib", "usable_gib")


def train_estimate(
    model: ModelSpec, hw: Hardware, gpus: int, job: CompareTrainJob
) -> dict[str, Any]:
    """Training time and memory for `job` on `gpus` accelerators described by `hw`."""
    if job.mfu is not None:
        return _first_order(model, hw, gpus, job)
    from flopwise.plan.train import LayoutConstraints, plan_training
    from flopwise.plan.train import TrainJob as PlannerJob

    seq = job.seq_len_for(model.max_seq_len)
    plan = plan_training(
        model,
        hw,
        PlannerJob(
            gpus=gpus,
            seq_len=seq,
            global_batch_seqs=job.batch_seqs_for(seq),
            tokens=job.tokens,
            dtype=job.dtype,
            recipe=job.recipe,
            **dict(job.framework_options),
            objective=job.objective,
            gpus_per_node=job.gpus_per_node,
            scaleup_domain=job.scaleup_domain,
        ),
        LayoutConstraints(**job.layout),
    ).to_dict()
    nothing_fits = (plan.get("search") or {}).get("nothing_fits")
    why_not = None
    if nothing_fits:
        why_not = "; ".join([nothing_fits["why"], *nothing_fits.get("what_would", [])[:1]])
    return {
        "method": "model",
        "step_time_s": plan["step_time_s"],
        "mfu": plan["mfu"],
        "train_days": plan["train_days"],
        "gpu_hours": plan["gpu_hours"],
        "memory_per_gpu_gib": plan["memory_per_gpu_gib"],
        "device_memory_gib": plan["device_memory_gib"],
        "fits": plan["fits"],
        "why_not": why_not,
        "layout": plan["layout"],
        "breakdown": {k: v for k, v in plan["breakdown"].items() if isinstance(v, (int, float))},
        "memory_breakdown": {
            k: v
            for k, v in plan["memory_breakdown"].items()
            if k.endswith("_gib") and k not in _TRAIN_MEMORY_SKIP and isinstance(v, (int, float))
        },
        "plan": plan,
    }


def _first_order(model: ModelSpec, hw: Hardware, gpus: int, job: CompareTrainJob) -> dict[str, Any]:
    from flopwise.plan.first_order import first_order_train

    assert job.mfu is not None
    plan = first_order_train(
        model,
        hw,
        gpus=gpus,
        tokens=job.tokens,
        seq_len=job.seq_len,
        mfu=job.mfu,
        dtype=job.dtype,
    ).to_dict()
    return {
        "method": "first-order",
        "step_time_s": None,
        "mfu": plan["mfu"],
        "train_days": plan["train_days"],
        "gpu_hours": plan["gpu_hours"],
        "memory_per_gpu_gib": plan["memory_per_gpu_gib"],
        "device_memory_gib": plan["device_memory_gib"],
        "fits": plan["fits"],
        "why_not": None,
        "layout": None,
        "breakdown": None,
        "memory_breakdown": None,
        "plan": plan,
    }


#: Time and memory components the report charts (the planner's totals are left out).
_INFER_TIME_PARTS = (
    "weights_read_ms",
    "kv_read_ms",
    "compute_ms",
    "communication_ms",
    "overhead_ms",
    "activations_ms",
)
_INFER_MEMORY_PARTS = ("weights_gib", "kv_cache_gib", "workspace_gib", "runtime_reserved_gib")


def infer_estimate(
    model: ModelSpec, hw: Hardware, gpus: int, job: CompareInferJob
) -> dict[str, Any]:
    """Latency and throughput of one replica (`gpus` = tp x pp accelerators) serving `job`."""
    from flopwise.plan.infer import InferJob as PlannerJob
    from flopwise.plan.infer import plan_inference

    if gpus % job.pp:
        raise FlopwiseError(f"a {gpus}-GPU replica is not a multiple of --pp {job.pp}")
    plan = plan_inference(
        model,
        hw,
        PlannerJob(
            input_len=job.input_len,
            output_len=job.output_len,
            batch=job.batch,
            tp=gpus // job.pp,
            pp=job.pp,
            replicas=1,
            weight_dtype=job.weight_dtype,
            kv_dtype=job.kv_dtype,
            act_dtype=job.act_dtype,
            engine=job.engine,
            num_requests=job.num_requests,
            concurrency=job.concurrency,
            request_rate=job.request_rate,
            memory_fraction=job.memory_fraction,
            allow_long_context=job.allow_long_context,
            fp8_context_attention=job.fp8_context_attention,
            prefill_cuda_graphs=job.prefill_cuda_graphs,
            decode_kernel=job.decode_kernel,
            cuda_graph_batch_sizes=job.cuda_graph_batch_sizes,
            engine_max_batch=job.engine_max_batch,
            engine_max_tokens=job.engine_max_tokens,
            output_spread=job.output_spread,
            scheduler_poll_steps=job.scheduler_poll_steps,
        ),
    ).to_dict()
    request = plan["breakdown"]["request"]
    memory = plan["memory"]
    return {
        "method": "model",
        "ttft_ms": plan["ttft_ms"],
        "tpot_ms": plan["tpot_ms"],
        "e2e_latency_s": plan["e2e_latency_s"],
        "output_tokens_per_s": plan["output_tokens_per_s"],
        "memory_per_gpu_gib": plan["memory_per_gpu_gib"],
        "device_memory_gib": memory.get("device_gib"),
        "fits": plan["fits"],
        "batch": plan["batch"],
        "layout": {"tp": gpus // job.pp, "pp": job.pp},
        "breakdown": {k: request[k] for k in _INFER_TIME_PARTS if k in request},
        "memory_breakdown": {k: memory[k] for k in _INFER_MEMORY_PARTS if k in memory},
        "offline": plan.get("offline"),
        "online": plan.get("online"),
        "arrivals": plan.get("arrivals"),
        "plan": plan,
    }
