"""Collectives timed as NCCL's tuner prices them (plan/nccl_latency.py)."""

from __future__ import annotations

import pytest

from flopwise.collectives import BUSBW_FACTORS
from flopwise.hardware import hardware_from_catalog
from flopwise.plan import nccl_latency
from flopwise.plan.roofline import collective_time_s, tier_for

GB = 1e9


def _t(op: str, size: float, n: int, ppn: int, busbw_gbps: float = 360.0) -> float:
    return nccl_latency.collective_s(op, size, n, ppn, busbw_gbps * GB, BUSBW_FACTORS[op](n))


def test_a_tiny_all_reduce_costs_ll_latency_not_alpha_per_step() -> None:
    # 8 GPUs on NVLink, 8 bytes: NCCL picks LL, 6.6 us base + 14 steps x 0.6 us = 15 us
    # (nccl-tests on an HGX H100 reports all_reduce latencies in the tens of microseconds at
    # 8 B, not the 14 x 10 us = 140 us that a 10 us alpha per ring step would give)
    t = _t("all_reduce", 8, 8, 8)
    assert t == pytest.approx(15.0e-6, rel=1e-3)  # plus 8 B at half the bus rate
    assert t < 20e-6


def test_a_large_collective_runs_at_the_bus_bandwidth() -> None:
    size = 4e9
    t = _t("all_gather", size, 8, 8)
    pure = BUSBW_FACTORS["all_gather"](8) * size / (360 * GB)
    assert pure < t < pure + 40e-6  # Simple: full bus rate plus 8.4 + 7 x 3.4 us of latency


def test_the_protocol_switches_with_message_size() -> None:
    # the effective bus bandwidth climbs with size, from latency-bound to bandwidth-bound
    sizes = [1e3, 1e5, 1e6, 1e7, 1e8, 1e9]
    busbw = [BUSBW_FACTORS["all_reduce"](8) * s / _t("all_reduce", s, 8, 8) / GB for s in sizes]
    assert busbw == sorted(busbw)
    assert busbw[0] < 1.0 and busbw[-1] > 0.95 * 360


def test_only_node_crossing_steps_pay_the_network_latency() -> None:
    # 512 ranks on 64 nodes of 8: a ring all-gather has 511 steps, 63 of them between nodes
    size = 1e3  # latency-bound
    t = _t("all_gather", size, 512, 8, busbw_gbps=45.0)
    every_step_on_the_network = 511 * nccl_latency.HW_LATENCY_US["net"]["ring"][0] * 1e-6
    assert t < every_step_on_the_network
    # one rank per node: every step crosses the network, so it costs more
    assert _t("all_gather", size, 512, 1, busbw_gbps=45.0) > t


def test_a_tree_serves_a_small_all_reduce_across_many_nodes() -> None:
    # 1024 ranks, 128 nodes: the tree's 2 x log2(128) network hops beat the ring's 254
    size = 1e4
    n, ppn = 1024, 8
    t = _t("all_reduce", size, n, ppn, busbw_gbps=45.0)
    ring_only_latency = (
        nccl_latency.BASE_LATENCY_US["ring"][0]
        + 2 * (n // ppn - 1) * nccl_latency.HW_LATENCY_US["net"]["ring"][0]
    ) * 1e-6
    assert t < ring_only_latency


def test_gpu_tiers_use_nccl_and_tpu_tiers_keep_alpha() -> None:
    h100 = tier_for(hardware_from_catalog("h100-sxm"), 8, spans_nodes=False)
    assert h100.nccl
    tpu = tier_for(hardware_from_catalog("tpu-v5e"), 4, spans_nodes=False)
    assert not tpu.nccl
    # alpha model on the TPU: (n - 1) steps x alpha + bytes at the busbw
    t = collective_time_s("all_gather", 1e3, 4, tpu)
    assert t == pytest.approx(3 * tpu.alpha_s + 0.75 * 1e3 / (tpu.bw_gbps * GB))


def test_one_rank_is_free() -> None:
    assert _t("all_reduce", 1e9, 1, 1) == 0.0
    assert _t("all_reduce", 0.0, 8, 8) == 0.0


@pytest.mark.parametrize(
    ("accelerator", "link_gbps", "fraction"),
    [
        # NCCL's own NVLink model: 20.0 of 25 GB/s per link (src/graph/topo.h SM80_NVLINK_BW)
        ("h100-sxm", 450.0, 0.80),
        ("a100-sxm-80gb", 300.0, 0.80),
        # RCCL's xGMI model on gfx94: 48 of 64 GB/s per link (ROCm/rccl#1210)
        ("mi300x", 448.0, 0.75),
        ("mi325x", 448.0, 0.75),
    ],
)
def test_scale_up_busbw_is_the_libraries_usable_link_rate(
    accelerator: str, link_gbps: float, fraction: float
) -> None:
    hw = hardware_from_catalog(accelerator)
    assert hw.scaleup_bw_uni_gbps == pytest.approx(link_gbps)
    tier = tier_for(hw, 8, spans_nodes=False)
    assert tier.bw_gbps == pytest.approx(link_gbps * fraction)
