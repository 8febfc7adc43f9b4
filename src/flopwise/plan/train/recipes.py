"""Training-state recipes the planner knows: the workload's, plus framework defaults.

Megatron-Core's distributed data parallel keeps gradients in the parameter dtype unless
``grad_reduce_in_fp32`` is set (megatron/core/distributed/distributed_data_parallel_config.py,
default False), so NeMo/Megatron-Core runs hold 16-bit gradients; its fp8 path keeps bf16 weights
plus an fp8 copy (Transformer Engine).
"""

from __future__ import annotations

from types import MappingProxyType

from flopwise.errors import FlopwiseError
from flopwise.workload.memory_bytes import TRAINING_RECIPES, TrainingRecipe

_MCORE = "Megatron-Core DistributedDataParallelConfig.grad_reduce_in_fp32=False (default)"

EXTRA_RECIPES = MappingProxyType(
    {
        r.name: r
        for r in (
            TrainingRecipe("mcore-bf16", 2, 2, 4, 8, _MCORE, "bf16 weights and grads (16 B)"),
            TrainingRecipe(
                "fsdp-mixed",
                0,
                4,
                4,
                8,
                "PyTorch FSDP MixedPrecision: the sharded fp32 parameters are the master copy and "
                "are cast to param_dtype only when gathered for compute",
                "fp32 sharded params + fp32 grads + Adam (16 B); 16-bit copies are transient",
            ),
            TrainingRecipe(
                "mcore-fp8",
                3,
                2,
                4,
                8,
                _MCORE + "; Transformer Engine fp8 weight copy",
                "bf16 weights + fp8 copy, bf16 grads, fp32 master and Adam (17 B)",
            ),
        )
    }
)


def recipe_names() -> tuple[str, ...]:
    return tuple(TRAINING_RECIPES) + tuple(EXTRA_RECIPES)


def resolve_recipe(name: str) -> TrainingRecipe:
    r = TRAINING_RECIPES.get(name) or EXTRA_RECIPES.get(name)
    if r is None:
        raise FlopwiseError(f"unknown training recipe {name!r}; valid: {', '.join(recipe_names())}")
    return r
