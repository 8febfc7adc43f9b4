"""Op-level selective checkpointing of a float8 model prices like a bf16 one.

torchtitan's op-level policy saves every other ``aten.mm`` output (parallelize_llama.py
``_save_list`` at 820504e, June 2025, which has no ``aten._scaled_mm``). torchao's float8
linears reach ``aten._scaled_mm`` through a tensor subclass whose ``aten.mm`` dispatches to it.
If the policy saw the inner op, nothing of a float8 linear would be saved and every float8
matmul would run again in the backward; if it sees the ``aten.mm`` the subclass receives, the
float8 model keeps bf16's every-other-matmul rule, which is how the planner prices it (the
`op` recompute share does not depend on the dtype: workload/flops.py op_recompute_params).

Measured here on the installed torch, eager and compiled through AOTAutograd (split by the
min-cut partitioner Inductor uses, tests/aot_graphs.py), with a stand-in
subclass whose ``aten.mm`` runs another aten op (``addmm``) on its inner tensors, inside a
custom autograd Function as torchao's ``matmul_with_hp_or_float8_args`` is.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
from torch.utils._pytree import tree_map
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from aot_graphs import TORCH_FUNCTION_INSTANTIATION_WARNING, calls, compiled_graphs


class _Scaled(torch.Tensor):
    """A wrapper subclass whose matmul runs a different aten op on its inner tensor (as
    torchao's Float8Tensor turns ``aten.mm`` into ``aten._scaled_mm``)."""

    inner: torch.Tensor

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> _Scaled:
        return torch.Tensor._make_wrapper_subclass(  # type: ignore[attr-defined,no-any-return]
            cls, inner.shape, strides=inner.stride(), dtype=inner.dtype, device=inner.device
        )

    def __init__(self, inner: torch.Tensor) -> None:
        self.inner = inner

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["inner"], None

    @staticmethod
    def __tensor_unflatten__(inner: dict[str, torch.Tensor], meta: Any, size: Any, stride: Any):  # type: ignore[no-untyped-def]
        return _Scaled(inner["inner"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func is torch.ops.aten.mm.default:
            a, b = args
            zero = torch.zeros((), dtype=a.dtype)
            return torch.ops.aten.addmm.default(zero, a.inner, b.inner)

        def unwrap(x: Any) -> Any:
            return x.inner if isinstance(x, _Scaled) else x

        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
        return tree_map(lambda x: _Scaled(x) if isinstance(x, torch.Tensor) else x, out)


class _ScaledLinear(torch.autograd.Function):
    """x @ w.T with both operands "cast" (x * 1) to the subclass, as a float8 linear does."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return torch.mm(_Scaled(x * 1.0), _Scaled(w.t() * 1.0))

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, w = ctx.saved_tensors
        return (
            torch.mm(_Scaled(g * 1.0), _Scaled(w * 1.0)),
            torch.mm(_Scaled(g.t() * 1.0), _Scaled(x * 1.0)),
        )


def _block(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return _ScaledLinear.apply(torch.relu(_ScaledLinear.apply(x, w1)), w2)  # type: ignore[no-any-return]


def _run(compiled: bool, save: Any) -> tuple[set[str], dict[str, int]]:
    """(the ops the policy was asked about in the forward, addmm calls per compiled graph)"""
    seen: set[str] = set()

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        if not ctx.is_recompute:
            seen.add(str(func))
        return CheckpointPolicy.MUST_SAVE if func in save else CheckpointPolicy.PREFER_RECOMPUTE

    context_fn = functools.partial(create_selective_checkpoint_contexts, policy)

    def step(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
        return checkpoint(_block, x, w1, w2, use_reentrant=False, context_fn=context_fn)  # type: ignore[no-any-return]

    torch.manual_seed(0)
    x = torch.randn(8, 16, requires_grad=True)
    w1, w2 = torch.randn(32, 16, requires_grad=True), torch.randn(16, 32, requires_grad=True)
    if not compiled:
        step(x, w1, w2).sum().backward()
        return seen, {}
    graphs = compiled_graphs(step, x, w1, w2)
    return seen, {kind: len(calls(gm, "addmm")) for kind, gm in graphs.items()}


@pytest.mark.filterwarnings(TORCH_FUNCTION_INSTANTIATION_WARNING)
@pytest.mark.parametrize("compiled", [False, True])
def test_the_policy_sees_the_subclass_matmul_not_the_op_it_becomes(compiled: bool) -> None:
    seen, _ = _run(compiled, save=(torch.ops.aten.mm.default,))
    matmuls = {op for op in seen if "mm" in op}
    assert matmuls == {"aten.mm.default"}


@pytest.mark.filterwarnings(TORCH_FUNCTION_INSTANTIATION_WARNING)
def test_saving_aten_mm_keeps_the_float8_matmuls_out_of_the_backward() -> None:
    # saved: the backward graph holds only its own four matmuls (two data, two weight
    # gradients); saving nothing, the first linear's forward runs there again (its output
    # feeds the second linear's weight gradient), the second's, which nothing reads, does not
    _, saved = _run(True, save=(torch.ops.aten.mm.default,))
    _, none = _run(True, save=())
    assert saved == {"fw": 2, "bw": 4}
    assert none == {"fw": 2, "bw": 5}
