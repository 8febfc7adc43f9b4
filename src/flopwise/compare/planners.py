"""The narrow seam between the comparison and the planners.

The comparison asks two questions of a planner and reads a fixed set of keys back, so swapping
planners touches only this module:

- ``train_estimate(model, hw, gpus, job)`` -> ``method, step_time_s, mfu, train_days, gpu_hours,
  memory_per_gpu_gib, device_memory_gib, fits, layout, breakdown, memory_breakdown, plan``
- ``infer_estimate(model, hw, gpus, job)`` (one replica of `gpus` GPUs) -> ``method, ttft_ms,
  tpot_ms, e2e_latency_s, output_tokens_per_s, memory_per_gpu_gib, device_memory_gib, fits,
  layout, breakdown, memory_breakdown, plan``

A planner that cannot run the job raises FlopwiseError; the comparison lists the reason.
"""

from __future__ import annotations

from typing import Any

from flopwise.compare.jobs import InferJob, TrainJob
from flopwise.hardware import Hardware
from flopwise.units import GIB
from flopwise.workload.spec import ModelSpec


def train_estimate(model: ModelSpec, hw: Hardware, gpus: int, job: TrainJob) -> dict[str, Any]:
    """Training time and memory for `job` on `gpus` accelerators described by `hw`."""
    from flopwise.plan.first_order import DEFAULT_MFU, first_order_train

    plan = first_order_train(
        model,
        hw,
        gpus=gpus,
        tokens=job.tokens,
        seq_len=job.seq_len,
        mfu=job.mfu or DEFAULT_MFU,
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
        "layout": None,
        "breakdown": None,
        "memory_breakdown": None,
        "plan": plan,
    }


def infer_estimate(model: ModelSpec, hw: Hardware, gpus: int, job: InferJob) -> dict[str, Any]:
    """Latency and throughput of one replica of `gpus` accelerators serving `job`."""
    from flopwise.compare._roofline_infer import roofline_infer

    plan = roofline_infer(model, hw, gpus, job)
    return {
        "method": plan["method"],
        "ttft_ms": plan["ttft_ms"],
        "tpot_ms": plan["tpot_ms"],
        "e2e_latency_s": plan["e2e_latency_s"],
        "output_tokens_per_s": plan["output_tokens_per_s"],
        "memory_per_gpu_gib": plan["memory_per_gpu_gib"],
        "device_memory_gib": None if hw.memory_bytes is None else hw.memory_bytes / GIB,
        "fits": plan["fits"],
        "layout": {"tp": gpus},
        "breakdown": plan["breakdown"],
        "memory_breakdown": plan["memory_breakdown"],
        "plan": plan,
    }
