"""Compiled float8 linears that read one input cast it once.

torchtitan's attention block runs three float8 linears (wq, wk, wv) on one input, each a
torchao autograd Function that computes its own amax, scale and FP8 copy of that input. The
planner charges one cast per distinct input (plan/train/fp8.py layer_cast_cost), which holds
if torch.compile merges the three identical casts. Measured here on the installed torch:
AOTAutograd with the min-cut partitioner Inductor uses merges them (common-subexpression
elimination of the joint graph), so the compiled forward holds one amax of the shared input
beside one per weight; the default partitioner, which does no elimination, keeps three.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

# Dynamo, tracing the custom autograd Function, instantiates torch's Function base class, which
# torch itself warns about (DeprecationWarning from torch/autograd/function.py): not this code's
_TORCH_INTERNAL_WARNING = "ignore:.*should not be instantiated:DeprecationWarning"


def _cast(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Tensor-wise dynamic scaling: amax, scale, saturated FP8 copy."""
    scale = 448.0 / t.abs().max().clamp(min=1e-12)
    return (t * scale).clamp(-448, 448).to(torch.float8_e4m3fn), scale


class _Float8Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        (xq, sx), (wq, sw) = _cast(x), _cast(w)
        ctx.save_for_backward(x, w)
        return (xq.to(x.dtype) @ wq.to(x.dtype).t()) / (sx * sw)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, w = ctx.saved_tensors
        (gq, sg), (wq, sw), (xq, sx) = _cast(g), _cast(w), _cast(x)
        gx = (gq.to(g.dtype) @ wq.to(g.dtype)) / (sg * sw)
        gw = (gq.to(g.dtype).t() @ xq.to(g.dtype)) / (sg * sx)
        return gx, gw


def _qkv(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor) -> torch.Tensor:
    return _Float8Linear.apply(x, wq) + _Float8Linear.apply(x, wk) + _Float8Linear.apply(x, wv)  # type: ignore[no-any-return]


def _forward_amaxes(partition_fn: Any) -> int:
    """abs() ops (one per amax) in the compiled forward graph of the three linears."""
    from functorch.compile import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    counts: list[int] = []

    def forward_compiler(gm: torch.fx.GraphModule, _: Any):  # type: ignore[no-untyped-def]
        nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
        counts.append(sum("abs" in str(n.target) for n in nodes))
        return make_boxed_func(gm.forward)

    def backend(gm: torch.fx.GraphModule, inputs: Any):  # type: ignore[no-untyped-def]
        kwargs = {} if partition_fn is None else {"partition_fn": partition_fn}
        return aot_module_simplified(
            gm,
            inputs,
            fw_compiler=forward_compiler,
            bw_compiler=lambda g, _: make_boxed_func(g.forward),
            **kwargs,
        )

    torch._dynamo.reset()
    torch.manual_seed(0)
    x = torch.randn(64, 32, dtype=torch.bfloat16, requires_grad=True)
    ws = [torch.randn(32, 32, dtype=torch.bfloat16, requires_grad=True) for _ in range(3)]
    torch.compile(_qkv, backend=backend)(x, *ws).sum().backward()
    assert len(counts) == 1
    return counts[0]


@pytest.mark.filterwarnings(_TORCH_INTERNAL_WARNING)
def test_inductors_partitioner_casts_a_shared_input_once() -> None:
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    # one amax for x, one per weight
    assert _forward_amaxes(min_cut_rematerialization_partition) == 1 + 3


@pytest.mark.filterwarnings(_TORCH_INTERNAL_WARNING)
def test_without_elimination_each_linear_casts_it_again() -> None:
    assert _forward_amaxes(None) == 3 + 3
