"""Expert all-to-alls overlapped with another microbatch's compute (``--ep-comm-overlap``).

DualPipe and Megatron-Core's ``overlap_moe_expert_parallel_comm`` run a layer's forward for one
microbatch beside its backward for another, the dispatch and combine of each on a communication
stream. That compute can hide the all-to-alls only up to its own length: what the four
all-to-alls of the pair take beyond it stays exposed, and the hidden part costs the SMs the
communication kernels take (OVERLAP_COMPUTE_TAX). The cases below check both ends of that rule
on the planner's own per-layer numbers.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training
from flopwise.plan.train.constants import OVERLAP_COMPUTE_TAX
from flopwise.workload.hf import load_model

DSV3 = load_model("deepseek-v3")
JOB = TrainJob(gpus=256, seq_len=4096, global_batch_seqs=2048, dtype="bf16", framework="nemo")


def _ep_exposed(hw_id: str, overlap: bool, ep: int, pp: int) -> tuple[float, float]:
    """(exposed all-to-all seconds, compute seconds) of a DeepSeek-V3 step."""
    hw = hardware_from_catalog(hw_id)
    cons = LayoutConstraints(tp=1, pp=pp, ep=ep, cp=1, zero=1, microbatch=1, recompute="full")
    plan = plan_training(DSV3, hw, replace(JOB, ep_comm_overlap=overlap), cons)
    b = plan.to_dict()["breakdown"]
    return b["ep_comm_exposed_s"], b["compute_s"] + b["recompute_s"]


def test_inside_an_nvlink_domain_the_compute_hides_the_all_to_alls() -> None:
    # EP 64 inside GB200's NVL72 domain: each layer's all-to-alls are shorter than its compute
    plain, compute = _ep_exposed("gb200", overlap=False, ep=64, pp=4)
    hidden, _ = _ep_exposed("gb200", overlap=True, ep=64, pp=4)
    assert plain < compute
    assert hidden == pytest.approx(OVERLAP_COMPUTE_TAX * plain, rel=1e-6)


def test_across_nodes_what_exceeds_the_compute_stays_exposed() -> None:
    # Qwen3-30B-A3B at EP 32 over four 8-GPU H100 nodes, a plain all-to-all: its small experts
    # compute less per layer than the network takes to move their tokens, so the overlap hides
    # no more than that compute
    qwen = load_model("qwen3-30b-a3b")
    hw = hardware_from_catalog("h100-sxm")
    cons = LayoutConstraints(tp=1, pp=1, ep=32, cp=1, zero=1, microbatch=1, recompute="full")
    job = TrainJob(gpus=32, seq_len=4096, global_batch_seqs=512, dtype="bf16", framework="nemo")
    plain = plan_training(qwen, hw, job, cons).to_dict()["breakdown"]["ep_comm_exposed_s"]
    over = plan_training(qwen, hw, replace(job, ep_comm_overlap=True), cons)
    hidden = over.to_dict()["breakdown"]["ep_comm_exposed_s"]
    assert hidden > 2 * OVERLAP_COMPUTE_TAX * plain  # no longer priced as almost free
    assert hidden < plain  # but the compute still hides its own length
