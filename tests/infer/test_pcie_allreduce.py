"""Tensor parallelism over PCIe: the tier comes from the node type's catalog row, and no custom
all-reduce (it needs NVLink) is credited."""

from __future__ import annotations

import pytest

from flopwise.catalog.collectives import intra_collective, load_intra_collectives
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.efficiency import SCALEUP_ALPHA_S, SCALEUP_LINK_FRACTION
from flopwise.plan.infer.comm import allreduce_s
from flopwise.plan.infer.constants import get_engine
from flopwise.plan.roofline import collective_time_s, tier_for
from flopwise.units import GB


def test_every_row_has_a_source_and_date() -> None:
    rows = load_intra_collectives()
    assert rows
    for row in rows.values():
        assert row.source.startswith("http") and row.as_of and row.busbw_gbps > 0


@pytest.mark.parametrize(
    "system,accel", [("pcie-l40s-8x", "l40s"), ("pcie-a100-8x", "a100-pcie-80gb")]
)
def test_pcie_tier_bandwidth_comes_from_the_catalog_row(system: str, accel: str) -> None:
    hw = hardware_from_catalog(accel, system)
    for group in (2, 4, 8):
        row = intra_collective(system, "all_reduce", group)
        assert row is not None and row.gpus >= group
        tier = tier_for(hw, group, spans_nodes=False)
        assert tier.bw_gbps == row.busbw_gbps
        assert tier.bw_for("all_gather") == row.busbw_gbps  # same PCIe links for every op
        if row.latency_us is None:
            assert tier.alpha_s == SCALEUP_ALPHA_S
        else:  # the published latency of one all-reduce, spread over the ring's 2(n-1) steps
            assert tier.alpha_s * 2 * (group - 1) == pytest.approx(row.latency_us * 1e-6)
    # 8 GPUs cross the CPU sockets: slower than the 4 behind one socket
    assert tier_for(hw, 8, False).bw_gbps < tier_for(hw, 4, False).bw_gbps


def test_nvlink_nodes_keep_their_link_rate() -> None:
    hw = hardware_from_catalog("h100-sxm", "hgx-h100")
    assert tier_for(hw, 8, spans_nodes=False).bw_gbps == pytest.approx(450 * SCALEUP_LINK_FRACTION)


def test_pcie_allreduce_is_the_nccl_ring_not_a_custom_kernel() -> None:
    hw = hardware_from_catalog("l40s", "pcie-l40s-8x")
    engine = get_engine("tensorrt-llm")
    n_bytes = 256 * 8192 * 2.0  # 256 tokens of a 8192-wide 16-bit activation
    ring = collective_time_s("all_reduce", n_bytes, 8, tier_for(hw, 8, False))
    assert allreduce_s(n_bytes, 8, hw, engine) == pytest.approx(ring)
    # 42 us latency + 2 x 7/8 x 4 MiB / 16 GB/s: the ring over both sockets
    assert ring == pytest.approx(42e-6 + 1.75 * n_bytes / (16.0 * GB))


def test_nvlink_allreduce_may_use_the_one_shot_kernel() -> None:
    hw = hardware_from_catalog("h100-sxm", "hgx-h100")
    engine = get_engine("tensorrt-llm")
    small = 8 * 8192 * 2.0
    ring = collective_time_s("all_reduce", small, 8, tier_for(hw, 8, False))
    assert allreduce_s(small, 8, hw, engine) < ring


@pytest.mark.parametrize(
    "tp,n_bytes,kernel",
    [
        (2, 12e6, "one_shot"),  # two ranks: one-shot up to the 16 MB workspace
        (2, 20e6, "ring"),
        (4, 0.9e6, "one_shot"),
        (4, 1.1e6, "ring"),  # two-shot is off under AUTO: NCCL from 1 MB
        (8, 0.4e6, "one_shot"),
        (8, 0.6e6, "ring"),
        (8, 5e6, "ring"),
    ],
)
def test_tensorrt_llm_dispatches_as_its_auto_rule(tp: int, n_bytes: float, kernel: str) -> None:
    hw = hardware_from_catalog("h100-sxm", "hgx-h100")
    engine = get_engine("tensorrt-llm")
    tier = tier_for(hw, tp, False)
    ring = collective_time_s("all_reduce", n_bytes, tp, tier)
    one_shot = engine.allreduce_latency_s + (tp - 1) * n_bytes / (tier.bw_for("all_reduce") * GB)
    expected = one_shot if kernel == "one_shot" else ring
    assert allreduce_s(n_bytes, tp, hw, engine) == pytest.approx(expected)


def test_engines_with_the_cheapest_policy_may_use_two_shot() -> None:
    """vLLM's custom all-reduce keeps its two-stage kernel for mid-size messages: at 5 MB over
    8 H100s the two-shot time undercuts NCCL's ring, and TensorRT-LLM (NCCL there) is slower."""
    hw = hardware_from_catalog("h100-sxm", "hgx-h100")
    n_bytes = 5e6
    vllm = allreduce_s(n_bytes, 8, hw, get_engine("vllm"))
    trt = allreduce_s(n_bytes, 8, hw, get_engine("tensorrt-llm"))
    assert vllm < trt
    assert trt == pytest.approx(collective_time_s("all_reduce", n_bytes, 8, tier_for(hw, 8, False)))
