"""The training planner: memory per GPU, step time, layout search, days and dollars.

plan = plan_training(model, hardware, TrainJob(gpus=512, seq_len=8192,
                     global_batch_seqs=512, tokens=15e12), LayoutConstraints(tp=8))
plan.to_dict()["mfu"]
"""

from flopwise.plan.assumptions import assume_inter_node_bw
from flopwise.plan.train.job import TrainJob
from flopwise.plan.train.layout import Layout, LayoutConstraints
from flopwise.plan.train.plan import (
    FLOPS_CONVENTION,
    TrainPlan,
    plan_training,
)

__all__ = [
    "FLOPS_CONVENTION",
    "Layout",
    "LayoutConstraints",
    "TrainJob",
    "TrainPlan",
    "assume_inter_node_bw",
    "plan_training",
]
