"""torchtitan's op-level checkpointing under tensor parallelism gathers the linear inputs again.

Its save list at the commit of the June 2025 benchmark runs (pytorch/torchtitan 820504e,
torchtitan/models/llama3/parallelize_llama.py `_save_list`) keeps aten.mm outputs (every other
one), the SDPA outputs, `_c10d_functional.reduce_scatter_tensor` and aten.max, not the
sequence-parallel all-gathers: the backward gathers the attention and MLP inputs again, for the
re-run matmuls and the weight gradients that read them. The reduce-scatters are saved.
"""

from __future__ import annotations

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.roofline import collective_time_s
from flopwise.plan.train import Layout, TrainJob
from flopwise.plan.train.context import ModelContext
from flopwise.plan.train.step_time import layer_cost, step_breakdown


def _ctx() -> ModelContext:
    from flopwise.workload.hf import load_model

    return ModelContext(
        load_model("llama-3.1-8b"),
        hardware_from_catalog("h100-sxm"),
        TrainJob(gpus=8, seq_len=8192, global_batch_seqs=8, framework="torchtitan", compile=True),
    )  # type: ignore[arg-type]


def _layout(recompute: str, sp: bool = True) -> Layout:
    return Layout(
        tp=8, pp=1, dp=1, cp=1, zero=3, microbatch=2, recompute=recompute, sequence_parallel=sp
    )


def test_gathers_are_the_forwards_all_gathers_only() -> None:
    ctx = _ctx()
    lc = layer_cost(ctx, 8, 1, 2, True, 1)
    tokens = 2 * 8192
    tier = ctx.tier(8, 8)
    one = collective_time_s("all_gather", tokens * ctx.model.hidden * 2.0, 8, tier)
    assert lc.tp_gather_fwd == pytest.approx(2.0 * one)  # attention and MLP inputs, bf16
    assert 0.0 < lc.tp_gather_fwd < lc.tp_fwd  # the reduce-scatters are not in it
    assert layer_cost(ctx, 8, 1, 2, False, 1).tp_gather_fwd == 0.0  # all-reduce TP gathers none


def test_op_recompute_charges_the_gathers_once_per_layer_and_microbatch() -> None:
    ctx = _ctx()
    lay = _layout("op")
    m = lay.microbatches(ctx.job)
    lc = layer_cost(ctx, 8, 1, 2, True, 1)
    share = ctx.recompute_flops_per_token["op"] / (2.0 * ctx.counts.layer_matmul_active)
    compute_part = (lc.compute_fwd - lc.attn_fwd) * share
    bd = step_breakdown(ctx, lay, m)
    assert bd.recompute == pytest.approx(m * ctx.layers * (compute_part + lc.tp_gather_fwd))
    # full recompute re-runs every forward collective, the reduce-scatters too: more than op's
    full = step_breakdown(ctx, _layout("full"), m)
    assert full.recompute > bd.recompute
