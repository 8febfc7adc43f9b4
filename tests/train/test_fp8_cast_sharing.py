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

from aot_graphs import TORCH_FUNCTION_INSTANTIATION_WARNING, calls, compiled_graphs


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


def _forward_amaxes(min_cut: bool) -> int:
    """abs() ops (one per amax) in the compiled forward graph of the three linears."""
    torch.manual_seed(0)
    x = torch.randn(64, 32, dtype=torch.bfloat16, requires_grad=True)
    ws = [torch.randn(32, 32, dtype=torch.bfloat16, requires_grad=True) for _ in range(3)]
    return len(calls(compiled_graphs(_qkv, x, *ws, min_cut=min_cut)["fw"], "abs"))


@pytest.mark.filterwarnings(TORCH_FUNCTION_INSTANTIATION_WARNING)
def test_inductors_partitioner_casts_a_shared_input_once() -> None:
    # one amax for x, one per weight
    assert _forward_amaxes(min_cut=True) == 1 + 3


@pytest.mark.filterwarnings(TORCH_FUNCTION_INSTANTIATION_WARNING)
def test_without_elimination_each_linear_casts_it_again() -> None:
    assert _forward_amaxes(min_cut=False) == 3 + 3
