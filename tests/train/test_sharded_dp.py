"""Sharded data parallelism moves one transformer block per collective (plan/train/dp_comm.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import Layout, TrainJob
from flopwise.plan.train.context import ModelContext
from flopwise.plan.train.dp_comm import dp_exposed_s
from flopwise.workload.hf import load_model


def _ctx(gpus: int, layers: int | None = None) -> ModelContext:
    model = load_model("llama-3.1-8b")
    if layers is not None:
        model = replace(model, layers=layers)
    job = TrainJob(gpus=gpus, seq_len=2048, global_batch_seqs=gpus, recipe="fsdp-mixed")
    return ModelContext(model, hardware_from_catalog("h100-sxm"), job)


def test_more_blocks_mean_more_latency_for_the_same_bytes() -> None:
    # 32 vs 64 blocks of the same model: the byte volume is the same, the latency doubles
    few, many = _ctx(512, layers=32), _ctx(512, layers=64)
    lay = Layout(tp=1, pp=1, dp=512, zero=3)
    bytes_ratio = many.counts.total / few.counts.total
    t_few = dp_exposed_s(few, lay, 1, 0.0, 0.0)
    t_many = dp_exposed_s(many, lay, 1, 0.0, 0.0)
    assert t_many > bytes_ratio * t_few


def test_zero2_gathers_the_parameters_once_per_step() -> None:
    # ZeRO-2 / FSDP SHARD_GRAD_OP: every microbatch reduce-scatters gradients; the updated
    # parameters are all-gathered once per step. Exposed in full, 4 microbatches cost 4
    # reductions plus one gather, not 4 x (reduce + gather)
    ctx = _ctx(64)
    lay = Layout(tp=1, pp=1, dp=64, zero=2)
    one = dp_exposed_s(ctx, lay, 1, 0.0, 0.0)
    four = dp_exposed_s(ctx, lay, 4, 0.0, 0.0)
    zero3_one = dp_exposed_s(ctx, replace(lay, zero=3), 1, 0.0, 0.0)
    assert one < zero3_one  # ZeRO-3 gathers twice (forward and backward) per microbatch
    reduce_only = (four - one) / 3
    assert one > reduce_only * 1.3  # the step's single gather is on top of one reduction
    assert four == pytest.approx(one + 3 * reduce_only)
