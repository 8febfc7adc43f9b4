"""Inference planner: prefill and decode latency, throughput, memory and cost of serving a model.

Public surface: ``plan_inference(model, hardware, job, draft=None) -> InferPlan`` with
``InferJob`` in and ``InferPlan.to_dict()`` out; ``sweep_batches``, ``plan_for_target_tpot``
and ``DraftConfig`` for the sweep, the inverse question and speculative decoding.
"""

from flopwise.plan.infer.constants import ENGINES, EngineProfile, get_engine
from flopwise.plan.infer.job import InferJob, Precision, resolve_layout, resolve_precision
from flopwise.plan.infer.planner import InferPlan, plan_inference

__all__ = [
    "ENGINES",
    "EngineProfile",
    "InferJob",
    "InferPlan",
    "Precision",
    "get_engine",
    "plan_inference",
    "resolve_layout",
    "resolve_precision",
]
