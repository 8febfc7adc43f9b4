"""Compare accelerators and cloud offers on one job: time, cost, network, Pareto front."""

from flopwise.compare.candidates import Candidate, from_accelerators, from_offers
from flopwise.compare.engine import CompareResult, compare_infer, compare_train, mark_pareto
from flopwise.compare.jobs import CompareInferJob, CompareTrainJob

__all__ = [
    "Candidate",
    "CompareInferJob",
    "CompareResult",
    "CompareTrainJob",
    "compare_infer",
    "compare_train",
    "from_accelerators",
    "from_offers",
    "mark_pareto",
]
