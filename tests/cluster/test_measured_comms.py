"""Planners read measured busbw per network tier through results.measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.results.measured import apply_measurements, comms_tier
from flopwise.results.store import ResultStore


def _comms(store: ResultStore, busbw: float, group: str, nodes: int, **kw: str) -> int:
    summary = {"op": "all_reduce", "busbw_gbps": busbw, "group": group, "nodes": nodes}
    return store.add("comms", summary, {"rows": []}, accelerator="h100-sxm", **kw)


@pytest.mark.parametrize(
    ("group", "nodes", "tier"),
    [
        ("intra", 1, "intra"),
        ("intra", 4, "intra"),
        ("all", 1, "intra"),
        ("all", 2, "inter"),
        ("inter", 2, "inter"),
    ],
)
def test_comms_tier(group: str, nodes: int, tier: str) -> None:
    assert comms_tier({"group": group, "nodes": nodes}) == tier


def test_intra_and_inter_come_from_their_own_newest_runs(isolated_home: Path) -> None:
    store = ResultStore()
    _comms(store, 300.0, "intra", 1)
    older_inter = _comms(store, 20.0, "inter", 2)
    newest_intra = _comms(store, 360.0, "intra", 2)  # intra-node groups on a 2-node run
    _comms(store, 1.0, "inter", 2, status="failed")  # failed runs are never used
    hw = apply_measurements(hardware_from_catalog("h100-sxm"))
    assert hw.busbw_by_op["intra:all_reduce"] == 360.0
    assert hw.busbw_by_op["inter:all_reduce"] == 20.0
    assert f"result {newest_intra} " in hw.origins["busbw_gbps:intra:all_reduce"].detail
    assert f"result {older_inter} " in hw.origins["busbw_gbps:inter:all_reduce"].detail
    # the catalog knows H100's links, so no measured fallback stands in for other ops
    assert hw.intra_busbw_gbps is None and hw.inter_busbw_gbps is None


def test_pinned_comms_result_wins_its_tier(isolated_home: Path) -> None:
    store = ResultStore()
    pinned = _comms(store, 250.0, "intra", 1)
    _comms(store, 360.0, "intra", 1)
    _comms(store, 40.0, "all", 2)  # 2 nodes x 1 rank: per node = per GPU
    hw = apply_measurements(hardware_from_catalog("h100-sxm"), str(pinned))
    assert hw.busbw_by_op["intra:all_reduce"] == 250.0
    assert hw.busbw_by_op["inter:all_reduce"] == 40.0


def _h100_ctx(hw: object, gpus: int) -> object:
    from flopwise.plan.train import TrainJob
    from flopwise.plan.train.context import ModelContext
    from flopwise.workload.hf import load_model

    job = TrainJob(gpus=gpus, seq_len=4096, global_batch_seqs=gpus, tokens=1e9)
    return ModelContext(load_model("llama-3.1-8b"), hw, job)  # type: ignore[arg-type]


def test_a_measured_multi_node_busbw_is_not_multiplied_by_the_gpus_per_node(
    isolated_home: Path,
) -> None:
    # `bench comms --group all` on 2 nodes x 8 H100: 190 GB/s all-reduce busbw across nodes.
    # The old code stored it as per-GPU and the planner multiplied by 8 (capped at 360 GB/s).
    store = ResultStore()
    summary = {"op": "all_reduce", "busbw_gbps": 190.0, "group": "all", "nodes": 2, "ranks": 16}
    store.add("comms", summary, {"rows": []}, accelerator="h100-sxm")
    hw = apply_measurements(hardware_from_catalog("h100-sxm"))
    assert hw.busbw_by_op["inter:all_reduce"] == pytest.approx(190.0 / 8)
    ctx = _h100_ctx(hw, 16)
    tier = ctx.tier(16, 16)  # type: ignore[attr-defined]
    assert tier.name == "scale-out"
    assert tier.bw_for("all_reduce") == pytest.approx(190.0)


def test_each_collective_uses_its_own_measured_peak(isolated_home: Path) -> None:
    # NVLS lifts all-reduce busbw on H100 to ~480 GB/s; all-gather has no such path. The old
    # code applied the all-reduce peak to every collective.
    store = ResultStore()
    summary = {
        "op": "all_reduce",
        "busbw_gbps": 480.0,
        "group": "intra",
        "nodes": 1,
        "ranks": 8,
        "peak_busbw_gbps_by_op": {"all_reduce": 480.0, "all_gather": 350.0},
    }
    store.add("comms", summary, {"rows": []}, accelerator="h100-sxm")
    hw = apply_measurements(hardware_from_catalog("h100-sxm"))
    from flopwise.plan.roofline import collective_time_s, tier_for

    tier = tier_for(hw, 8, spans_nodes=False)
    assert tier.bw_for("all_reduce") == 480.0 and tier.bw_for("all_gather") == 350.0
    catalog = tier_for(hardware_from_catalog("h100-sxm"), 8, spans_nodes=False).bw_gbps
    assert tier.bw_for("reduce_scatter") == catalog  # not measured: the catalog's link rate
    size = 1e9
    # ring all-gather at the measured 350 GB/s; 1 GB runs NCCL's Simple protocol: base 8.4 us
    # + 7 NVLink steps x 3.4 us (NVIDIA/nccl src/graph/tuning.cc defaults)
    expected = (8.4 + 7 * 3.4) * 1e-6 + 7 / 8 * size / 350e9
    assert collective_time_s("all_gather", size, 8, tier) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("group", "nodes", "world", "tier", "basis"),
    [
        ("all", 1, 8, "intra", "per_gpu"),
        ("intra", 2, 16, "intra", "per_gpu"),
        ("inter", 2, 16, "inter", "per_gpu"),  # one rank per node per group: one NIC each
        ("all", 2, 16, "inter", "per_node"),  # every GPU of both nodes: the nodes' NICs
    ],
)
def test_comms_summary_says_tier_and_basis(
    group: str, nodes: int, world: int, tier: str, basis: str
) -> None:
    from flopwise.bench.comms import CommsConfig, CommsResult, CommsRow

    row = CommsRow("all_reduce", 1024, 256, "float32", 10.0, 9.0, 11.0, 0.1, 0.19, 0)
    result = CommsResult(CommsConfig(group=group), (row,), 8, 1, nodes, world, "nccl")
    s = result.summary()
    assert (s["tier"], s["busbw_basis"], s["ranks_per_node"]) == (tier, basis, world // nodes)
    assert s["busbw_gbps_by_op_and_bytes"] == {"all_reduce": {"1024": 0.19}}


def test_an_assumed_inter_node_rate_overrides_measured_inter_node_ops(isolated_home: Path) -> None:
    from flopwise.plan.roofline import tier_for
    from flopwise.plan.train import assume_inter_node_bw

    store = ResultStore()
    summary = {"op": "all_reduce", "busbw_gbps": 40.0, "group": "inter", "nodes": 2, "ranks": 2}
    store.add("comms", summary, {"rows": []}, accelerator="h100-sxm")
    hw = assume_inter_node_bw(apply_measurements(hardware_from_catalog("h100-sxm")), 10.0)
    tier = tier_for(hw, 2, spans_nodes=True)
    assert tier.bw_for("all_reduce") == tier.bw_gbps  # the measured 40 GB/s no longer applies
    assert "busbw_gbps:inter:all_reduce" not in hw.origins
