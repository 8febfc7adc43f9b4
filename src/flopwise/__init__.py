"""flopwise: measure, plan and compare accelerator compute for LLM training and inference.

The Python API is the product; the CLI only calls it. Nothing here imports torch. Names are
imported on first use (PEP 562), so `flopwise --help` and small commands do not pay for the
planners they do not run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "get_accelerator": "flopwise.catalog",
    "get_system": "flopwise.catalog",
    "load_accelerators": "flopwise.catalog",
    "load_systems": "flopwise.catalog",
    "Offer": "flopwise.catalog.offers",
    "load_offers": "flopwise.catalog.offers",
    "CompareInferJob": "flopwise.compare",
    "CompareResult": "flopwise.compare",
    "CompareTrainJob": "flopwise.compare",
    "compare_infer": "flopwise.compare",
    "compare_train": "flopwise.compare",
    "FlopwiseError": "flopwise.errors",
    "Hardware": "flopwise.hardware",
    "hardware_from_catalog": "flopwise.hardware",
    "FirstOrderTrainPlan": "flopwise.plan.first_order",
    "first_order_train": "flopwise.plan.first_order",
    "Goodput": "flopwise.plan.goodput",
    "GoodputInputs": "flopwise.plan.goodput",
    "Storage": "flopwise.plan.goodput",
    "plan_goodput": "flopwise.plan.goodput",
    "DraftConfig": "flopwise.plan.infer",
    "InferJob": "flopwise.plan.infer",
    "InferPlan": "flopwise.plan.infer",
    "plan_inference": "flopwise.plan.infer",
    "Layout": "flopwise.plan.train",
    "LayoutConstraints": "flopwise.plan.train",
    "TrainJob": "flopwise.plan.train",
    "TrainPlan": "flopwise.plan.train",
    "plan_training": "flopwise.plan.train",
    "ResultStore": "flopwise.results",
    "ModelSpec": "flopwise.workload",
    "ParamCounts": "flopwise.workload",
    "count_params": "flopwise.workload",
    "kv_cache_bytes_per_token": "flopwise.workload",
    "load_model": "flopwise.workload",
    "spec_from_config": "flopwise.workload",
    "train_flops_per_token": "flopwise.workload",
    "ModelReport": "flopwise.workload.report",
    "describe_model": "flopwise.workload.report",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'flopwise' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
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
