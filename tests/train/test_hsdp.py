"""HSDP (ZeRO-3 inside each node, replicas across nodes): memory, communication, flags."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import Layout, LayoutConstraints, TrainJob, plan_training
from flopwise.plan.train.context import ModelContext
from flopwise.plan.train.memory import state_bytes
from flopwise.plan.train.step_time import step_breakdown
from flopwise.workload.hf import load_model


def _ctx(gpus: int, acc: str = "h100-sxm") -> ModelContext:
    job = TrainJob(gpus=gpus, seq_len=4096, global_batch_seqs=gpus * 2, recipe="fsdp-mixed")
    return ModelContext(load_model("llama-3.1-8b"), hardware_from_catalog(acc), job)


def test_hsdp_shards_the_state_over_one_node() -> None:
    ctx = _ctx(64)
    full = state_bytes(ctx, Layout(tp=1, pp=1, dp=64, zero=3))
    hsdp = state_bytes(ctx, Layout(tp=1, pp=1, dp=64, zero=3, hsdp=True))
    # fsdp-mixed keeps 16 B/param of state: sharded 8 ways instead of 64 (the gathered-layer
    # buffer is the same)
    assert ctx.shard_group(1, 64, 1, True) == 8
    assert sum(hsdp.first[:4]) == pytest.approx(8 * sum(full.first[:4]), rel=1e-9)
    assert hsdp.first[4] == full.first[4]
    # with TP 2 a node holds 4 members of each DP group
    assert ctx.shard_group(2, 32, 1, True) == 4


def test_hsdp_is_full_sharding_on_one_node() -> None:
    ctx = _ctx(8)
    a = Layout(tp=1, pp=1, dp=8, zero=3)
    b = Layout(tp=1, pp=1, dp=8, zero=3, hsdp=True)
    assert state_bytes(ctx, a) == state_bytes(ctx, b)
    assert step_breakdown(ctx, a, 2).dp_comm == pytest.approx(step_breakdown(ctx, b, 2).dp_comm)


def test_hsdp_wins_where_the_scale_out_network_is_slow() -> None:
    # 25 Gb/s Ethernet per GPU, bf16 gradient reduction (FSDP PURE). Full sharding sends the
    # forward and backward gathers and the reduce-scatter across nodes (2 + 2 + 2 B/param per
    # microbatch over the node's 8 NIC rails); HSDP keeps them on NVLink and all-reduces only
    # each GPU's 1/8 gradient shard across nodes (2 x 7/8 x 2/8 B/param per NIC): less is
    # exposed, and 8x more state is kept per GPU. (With fp32 reduction the shard all-reduce
    # moves as much per NIC as full sharding's backward traffic, and HSDP gains little.)
    slow = replace(hardware_from_catalog("h100-sxm"), inter_bw_per_gpu_gbps=25 / 8)
    job = replace(_ctx(64).job, recipe="fsdp-pure")
    ctx = ModelContext(load_model("llama-3.1-8b"), slow, job)
    full = step_breakdown(ctx, Layout(tp=1, pp=1, dp=64, microbatch=2, zero=3), 1)
    hsdp = step_breakdown(ctx, Layout(tp=1, pp=1, dp=64, microbatch=2, zero=3, hsdp=True), 1)
    assert hsdp.dp_comm < 0.8 * full.dp_comm
    assert hsdp.optimizer > full.optimizer  # 8x more state to update per GPU
    # on DGX H100 the eight 400 Gb/s rails match NVLink's ring bandwidth: full sharding's
    # traffic costs the same, and HSDP's extra cross-node all-reduce makes it no faster
    ctx = _ctx(64)
    full = step_breakdown(ctx, Layout(tp=1, pp=1, dp=64, microbatch=2, zero=3), 1)
    hsdp = step_breakdown(ctx, Layout(tp=1, pp=1, dp=64, microbatch=2, zero=3, hsdp=True), 1)
    assert hsdp.dp_comm >= full.dp_comm


def test_hsdp_flag_needs_zero_three() -> None:
    with pytest.raises(FlopwiseError, match="needs --zero 3"):
        LayoutConstraints(zero=1, hsdp=True)


def test_search_considers_hsdp_and_respects_the_flag() -> None:
    model = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm")
    job = TrainJob(gpus=64, seq_len=4096, global_batch_seqs=128)
    plan = plan_training(model, hw, job, LayoutConstraints(hsdp=True, tp=1, pp=1))
    assert plan.best.layout.hsdp and plan.best.layout.zero == 3
    assert plan.fits
    off = plan_training(model, hw, job, LayoutConstraints(hsdp=False, zero=3, tp=1, pp=1))
    assert not off.best.layout.hsdp


def test_search_offers_no_hsdp_that_shards_over_one_gpu() -> None:
    # TP 8 fills a DGX H100: each node holds one member of every DP group, so "HSDP" would
    # shard over one GPU, replicating the whole state under a ZeRO-3 name; the search keeps full
    # sharding
    model = load_model("llama-3.1-70b")
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    job = TrainJob(gpus=128, seq_len=4096, global_batch_seqs=256)
    cons = LayoutConstraints(tp=8, pp=4, dp=4, cp=1, vpp=1, microbatch=1, recompute="full", zero=3)
    plan = plan_training(model, hw, job, cons)
    assert not plan.best.layout.hsdp and not any(c.layout.hsdp for c in plan.outcome.top)
    # the state is sharded over the 4 DP ranks, as the distributed optimizer shards it
    zero1 = plan_training(model, hw, job, replace(cons, zero=1)).best
    assert plan.best.memory.optimizer == pytest.approx(zero1.memory.optimizer)


def test_cli_hsdp_json_and_bad_combination() -> None:
    args = ("plan", "train", "llama-3.1-8b", "-a", "h100-sxm", "--gpus", "64", "--tokens", "1T")
    r = run_cli(*args, "--hsdp", "--tp", "1", "--pp", "1", "--json")
    assert r.returncode == 0, r.stderr
    layout = json.loads(r.stdout)["layout"]
    assert layout["hsdp"] is True and layout["zero"] == 3
    assert layout["zero_shard_gpus"] == 8  # one H100 node's DP ranks at tp=1
    bad = run_cli(*args, "--hsdp", "--zero", "2")
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "--zero 3" in bad.stderr
