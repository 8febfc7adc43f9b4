"""Inference planner: prefill and decode latency, throughput, memory and cost of serving a model.

Public surface: ``plan_inference(model, hardware, job, draft=None) -> InferPlan`` with
``InferJob`` in and ``InferPlan.to_dict()`` out; ``sweep_batches``, ``plan_for_target_tpot``
and ``DraftConfig`` for the sweep, the inverse question and speculative decoding.
"""

from flopwise.plan.infer.constants import ENGINES, EngineProfile, get_engine
from flopwise.plan.infer.job import InferJob, Precision, resolve_layout, resolve_precision
from flopwise.plan.infer.planner import plan_inference
from flopwise.plan.infer.result import InferPlan
from flopwise.plan.infer.speculative import DraftConfig, expected_tokens_per_step
from flopwise.plan.infer.sweep import SweepPoint, sweep_batches
from flopwise.plan.infer.target import TargetPlan, plan_for_target_tpot

__all__ = [
    "ENGINES",
    "DraftConfig",
    "EngineProfile",
    "InferJob",
    "InferPlan",
    "Precision",
    "SweepPoint",
    "TargetPlan",
    "expected_tokens_per_step",
    "get_engine",
    "plan_for_target_tpot",
    "plan_inference",
    "resolve_layout",
    "resolve_precision",
    "sweep_batches",
]
