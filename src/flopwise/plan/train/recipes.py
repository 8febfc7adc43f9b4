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
_NEMO_DIST_ADAM = (
    "NeMo 1.x optim distributed_fused_adam (NeMo-Framework-Launcher 24.07 training configs): "
    "megatron_base_model.setup_optimization sets store_param_remainders=True for an fp32 "
    "optimizer over bf16 weights (the master copy is the bf16 weight plus a 16-bit remainder), "
    "grad_sync_dtype bf16 as the launcher's H100 fp8 scripts set"
)

EXTRA_RECIPES = MappingProxyType(
    {
        r.name: r
        for r in (
            TrainingRecipe("mcore-bf16", 2, 2, 4, 8, _MCORE, "bf16 weights and grads (16 B)"),
            TrainingRecipe(
                "qlora-bf16-adam",
                2,
                2,
                0,
                8,
                "artidoro/qlora qlora.py (Dettmers et al. 2023's code): with --bf16 every LoraLayer "
                "is cast to torch.bfloat16 (no fp32 master), optimizer paged_adamw_32bit",
                "QLoRA's adapters: bf16 weights and grads, fp32 Adam moments, no master (12 B)",
            ),
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
                "megatron-fp16",
                2,
                2,
                4,
                8,
                "Megatron-LM 2021 --fp16 without --accumulate-allreduce-grads-in-fp32: main_grad "
                "buffers in the parameter dtype (megatron/model/distributed.py), fp32 master "
                "and Adam in the fp16 optimizer",
                "fp16 weights and grads, fp32 master and Adam (16 B); grads all-reduced in fp16",
            ),
            TrainingRecipe(
                "fsdp-pure",
                0,
                4,
                4,
                8,
                "PyTorch FSDP MixedPrecision(param_dtype=reduce_dtype=bf16) (Composer "
                "mixed_precision: PURE): fp32 sharded params are the master copy; gradients are "
                "reduce-scattered in bf16 and upcast to the fp32 shard",
                "as fsdp-mixed (16 B), but the gradient reduce-scatter moves 2 B/param",
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
            TrainingRecipe(
                "nemo-bf16",
                2,
                2,
                2,
                8,
                _NEMO_DIST_ADAM,
                "bf16 weights and grads, 16-bit master remainders, fp32 Adam (14 B)",
            ),
            TrainingRecipe(
                "nemo-fp8",
                3,
                2,
                2,
                8,
                _NEMO_DIST_ADAM + "; Transformer Engine fp8 weight copy",
                "as nemo-bf16 plus the fp8 weight copy (15 B)",
            ),
        )
    }
)


#: Bytes per parameter the data-parallel gradient reduction moves, where it differs from the
#: stored gradient bytes. FSDP MixedPrecision reduces in ``reduce_dtype``: fp32 under
#: Composer's DEFAULT (``fsdp-mixed``), bf16 under PURE (``fsdp-pure``), then keeps the shard
#: in fp32 for the optimizer (torch.distributed.fsdp MixedPrecision docs).
GRAD_REDUCE_BYTES: MappingProxyType[str, float] = MappingProxyType({"fsdp-pure": 2.0})


def grad_reduce_bytes(recipe: TrainingRecipe) -> float:
    """Bytes per parameter of the gradient all-reduce / reduce-scatter for a recipe."""
    return GRAD_REDUCE_BYTES.get(recipe.name, recipe.grads)


def recipe_names() -> tuple[str, ...]:
    return tuple(TRAINING_RECIPES) + tuple(EXTRA_RECIPES)


def resolve_recipe(name: str) -> TrainingRecipe:
    r = TRAINING_RECIPES.get(name) or EXTRA_RECIPES.get(name)
    if r is None:
        raise FlopwiseError(f"unknown training recipe {name!r}; valid: {', '.join(recipe_names())}")
    return r
