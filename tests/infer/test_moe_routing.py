"""MoE serving pays for the permute and finalize around the expert GEMMs (memory-bound)."""

from __future__ import annotations

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer.constants import get_engine
from flopwise.plan.infer.latency import _moe_routing, make_rates


def _rates():  # type: ignore[no-untyped-def]
    hw = hardware_from_catalog("h100-sxm", "hgx-h100")
    return make_rates(hw, get_engine("tensorrt-llm"), "bf16", "bf16")


def test_routing_moves_each_token_once_in_and_out_and_each_routed_row_twice() -> None:
    r = _rates()
    tokens, hidden = 1000.0, 4096
    top2 = _moe_routing(tokens, 2 * tokens, hidden, r).activations_s
    top8 = _moe_routing(tokens, 8 * tokens, hidden, r).activations_s
    # permute reads the token and writes its k rows; finalize reads the k rows and writes the
    # token: (1 + k) 16-bit hidden states each way
    assert top8 / top2 == pytest.approx((1 + 8) / (1 + 2))
    mixtral_step = 2 * (1 + 2) * tokens * hidden * 2.0 / r.bw_bytes_s
    assert top2 == pytest.approx(mixtral_step)


def test_expert_parallel_ranks_move_only_their_rows() -> None:
    r = _rates()
    whole = _moe_routing(1000.0, 2000.0, 4096, r).activations_s
    ep4 = _moe_routing(1000.0, 500.0, 4096, r).activations_s
    assert ep4 < whole
    assert ep4 / whole == pytest.approx((1000 + 500) / (1000 + 2000))
