"""flopwise: measure, plan and compare accelerator compute for LLM training and inference.

The Python API is the product; the CLI only calls it. Nothing here imports torch.
"""

from flopwise.catalog import get_accelerator, get_system, load_accelerators, load_systems
from flopwise.catalog.offers import Offer, load_offers
from flopwise.compare import (
    CompareInferJob,
    CompareResult,
    CompareTrainJob,
    compare_infer,
    compare_train,
)
from flopwise.errors import FlopwiseError
from flopwise.hardware import Hardware, hardware_from_catalog
from flopwise.plan.first_order import FirstOrderTrainPlan, first_order_train
from flopwise.plan.goodput import Goodput, GoodputInputs, Storage, plan_goodput
from flopwise.plan.infer import DraftConfig, InferJob, InferPlan, plan_inference
from flopwise.plan.train import Layout, LayoutConstraints, TrainJob, TrainPlan, plan_training
from flopwise.results import ResultStore
from flopwise.workload import (
    ModelSpec,
    ParamCounts,
    count_params,
    kv_cache_bytes_per_token,
    load_model,
    spec_from_config,
    train_flops_per_token,
)
from flopwise.workload.report import ModelReport, describe_model

__version__ = "0.1.0"

__all__ = [
    "CompareInferJob",
    "CompareResult",
    "CompareTrainJob",
    "DraftConfig",
    "FirstOrderTrainPlan",
    "FlopwiseError",
    "Goodput",
    "GoodputInputs",
    "Hardware",
    "InferJob",
    "InferPlan",
    "Layout",
    "LayoutConstraints",
    "ModelReport",
    "ModelSpec",
    "Offer",
    "ParamCounts",
    "ResultStore",
    "Storage",
    "TrainJob",
    "TrainPlan",
    "__version__",
    "compare_infer",
    "compare_train",
    "count_params",
    "describe_model",
    "first_order_train",
    "get_accelerator",
    "get_system",
    "hardware_from_catalog",
    "kv_cache_bytes_per_token",
    "load_accelerators",
    "load_model",
    "load_offers",
    "load_systems",
    "plan_goodput",
    "plan_inference",
    "plan_training",
    "spec_from_config",
    "train_flops_per_token",
]
