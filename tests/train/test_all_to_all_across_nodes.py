"""Expert-parallel all-to-all across nodes: bound by each GPU's own NIC, not by the node's
rails together as the ring collectives are (plan/train/context.py ModelContext.tier)."""

from __future__ import annotations

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.efficiency import SCALEOUT_LINK_FRACTION
from flopwise.plan.roofline import collective_time_s
from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training
from flopwise.plan.train.context import ModelContext
from flopwise.results.store import ResultStore
from flopwise.workload.hf import load_model

NIC_GBPS = 400 / 8  # DGX B200: one 400 Gb/s NIC per GPU


def _ctx(measured_db: str | None = None) -> ModelContext:
    from flopwise.hardware import hardware_for

    hw = (
        hardware_for("b200", "dgx-b200", "latest", measured_db)
        if measured_db
        else hardware_from_catalog("b200", "dgx-b200")
    )
    return ModelContext(load_model("gpt-oss-120b"), hw, TrainJob(
        gpus=64, seq_len=4096, global_batch_seqs=1280))  # fmt: skip


def test_all_to_all_bus_bandwidth_is_the_nic_rate_times_n_minus_1_over_n_minus_k() -> None:
    ctx = _ctx()
    tier = ctx.tier(64, 64)  # 64 ranks over 8 nodes of 8
    nic = NIC_GBPS * SCALEOUT_LINK_FRACTION
    assert tier.ranks_per_node == 8
    assert tier.bw_for("all_to_all") == pytest.approx(nic * 63 / 56)
    # the ring collectives keep the node's rails together (k x the per-GPU rate, capped)
    assert tier.bw_for("all_reduce") == pytest.approx(8 * nic)
    # so one all-to-all moves each rank's off-node share, (n - k)/n of its buffer, at its NIC rate
    size = 377e6
    t = collective_time_s("all_to_all", size, 64, tier)
    off_node = size * 56 / 64 / (nic * 1e9)
    assert off_node < t < off_node * 1.08  # + NCCL latency and protocol overhead


def test_inside_one_node_nothing_changes() -> None:
    ctx = _ctx()
    inside = ctx.tier(8, 8)
    assert inside.ranks_per_node == 0  # scale-up: no network
    assert "all_to_all" not in inside.by_op


def test_a_measured_all_to_all_keeps_its_own_figure(tmp_path: object) -> None:
    db = str(tmp_path) + "/r.sqlite"  # type: ignore[operator]
    ResultStore(db).add(
        "comms",
        {"op": "all_to_all", "busbw_gbps": 44.0, "group": "all", "nodes": 2, "ranks": 16,
         "tier": "inter", "busbw_basis": "per_gpu", "peak_busbw_gbps_by_op": {"all_to_all": 44.0}},
        {}, accelerator="b200",
    )  # fmt: skip
    tier = _ctx(db).tier(64, 64)
    assert tier.bw_for("all_to_all") == pytest.approx(min(8 * 44.0, tier.bw_for("all_reduce")))


def test_expert_parallelism_across_nodes_costs_what_its_traffic_does() -> None:
    """GPT-OSS 120B on 64 B200 (8 per node): EP 64 sends 7/8 of every dispatch off the node.
    It was priced at the node's eight NICs together and planned faster than EP 8."""
    model = load_model("gpt-oss-120b")
    hw = hardware_from_catalog("b200", "dgx-b200")
    job = TrainJob(gpus=64, seq_len=4096, global_batch_seqs=1280, framework="nemo")
    fixed = dict(tp=1, pp=1, cp=1, dp=64, microbatch=4, zero=1)
    ep64 = plan_training(model, hw, job, LayoutConstraints(**fixed, ep=64))
    ep8 = plan_training(model, hw, job, LayoutConstraints(**fixed, ep=8))
    assert ep64.best.step.ep_comm > 10 * ep8.best.step.ep_comm
    assert ep64.step_time_s > ep8.step_time_s


def test_nodes_a_token_reaches() -> None:
    from flopwise.plan.train.step_time import expected_nodes_per_token

    v3 = load_model("deepseek-v3")  # 256 experts, top-8, 8 groups, top-4 groups
    assert (v3.expert_groups, v3.expert_groups_per_token) == (8, 4)
    # node-limited routing over 8 nodes: the 4 groups' nodes, 8 x (1 - C(7,4)/C(8,4)) = 4
    assert expected_nodes_per_token(v3, 8) == pytest.approx(4.0)
    assert expected_nodes_per_token(v3, 1) == 1.0
    qwen = load_model("qwen3-30b-a3b")  # 128 experts, top-8, no group limit
    assert qwen.expert_groups == 0
    # 8 experts among 128 over 8 nodes of 16: 8 x (1 - C(112,8)/C(128,8))
    import math

    want = 8 * (1 - math.comb(112, 8) / math.comb(128, 8))
    assert expected_nodes_per_token(qwen, 8) == pytest.approx(want)
    assert expected_nodes_per_token(qwen, 8) < 8


def _ep_comm_s(ep: int, dispatcher: str) -> float:
    """DeepSeek-V3 on 1,024 H100 (8 per node), PP 16, EP `ep`: exposed expert all-to-all."""
    from dataclasses import replace

    hw = replace(hardware_from_catalog("h100-sxm", "dgx-h100"), memory_bytes=None)
    cons = LayoutConstraints(tp=1, pp=16, ep=ep, cp=1, zero=1, microbatch=1, recompute="full")
    job = TrainJob(gpus=1024, seq_len=4096, global_batch_seqs=4096, dtype="fp8",
                   ep_dispatcher=dispatcher)  # fmt: skip
    return plan_training(load_model("deepseek-v3"), hw, job, cons).best.step.ep_comm


def test_deepep_dispatch_sends_a_token_once_per_remote_node() -> None:
    """DeepSeek-V3 at EP 64 on eight 8-GPU nodes: a plain all-to-all sends 8 copies of a token,
    7/8 of them off the node; DeepEP sends it to 4 nodes, 3.5 of them remote: half the network
    bytes, and the plan's all-to-all time follows."""
    assert _ep_comm_s(64, "deepep") == pytest.approx(
        _ep_comm_s(64, "alltoall") * 3.5 / 7.0, rel=0.10
    )
    # inside one node there is nothing to deduplicate
    assert _ep_comm_s(8, "deepep") == pytest.approx(_ep_comm_s(8, "alltoall"), rel=1e-9)


def test_unknown_dispatcher_is_a_one_line_error() -> None:
    from flopwise.errors import FlopwiseError

    with pytest.raises(FlopwiseError, match="ep dispatcher 'nccl' is not one of alltoall, deepep"):
        TrainJob(gpus=8, seq_len=4096, global_batch_seqs=8, ep_dispatcher="nccl")
