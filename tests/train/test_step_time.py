"""Step-time model: invariants and physics checks."""

from __future__ import annotations

import itertools

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import Layout, LayoutConstraints, TrainJob, plan_training
from flopwise.plan.train.context import ModelContext
from flopwise.plan.train.step_time import step_breakdown
from flopwise.workload.hf import load_model


def _ctx(
    model_id: str, gpus: int, acc: str = "h100-sxm", gbs: int = 256, seq: int = 4096, **job: object
) -> ModelContext:
    return ModelContext(
        load_model(model_id),
        hardware_from_catalog(acc),
        TrainJob(gpus=gpus, seq_len=seq, global_batch_seqs=gbs, **job),
    )  # type: ignore[arg-type]


LAYOUTS = [
    dict(tp=1, pp=1, dp=64, cp=1, zero=3, microbatch=2),
    dict(tp=8, pp=1, dp=8, cp=1, zero=1, microbatch=1, sequence_parallel=True),
    dict(tp=4, pp=4, dp=4, cp=1, zero=1, microbatch=1, vpp=2, sequence_parallel=True),
    dict(tp=2, pp=2, dp=8, cp=2, zero=1, microbatch=2),
]


@pytest.mark.parametrize("base", LAYOUTS)
def test_recompute_never_lowers_step_time(base: dict[str, object]) -> None:
    ctx = _ctx("llama-3.1-8b", 64)
    times = {}
    for rc in ("none", "selective", "full"):
        lay = Layout(recompute=rc, **base)  # type: ignore[arg-type]
        times[rc] = step_breakdown(ctx, lay, lay.microbatches(ctx.job)).step_time_s
    assert times["none"] <= times["selective"] <= times["full"]


def test_breakdown_adds_up_and_mfu_is_at_most_one() -> None:
    for model_id, acc in itertools.product(
        ("llama-3.1-8b", "mixtral-8x7b"), ("h100-sxm", "a100-sxm-80gb")
    ):
        plan = plan_training(
            load_model(model_id),
            hardware_from_catalog(acc),
            TrainJob(gpus=64, seq_len=4096, global_batch_seqs=256),
        )
        d = plan.to_dict()
        assert sum(d["breakdown"].values()) == pytest.approx(d["step_time_s"])
        assert 0 < d["mfu"] <= d["hfu"] <= 1
        assert d["hw_tflops_per_gpu"] <= d["peak_tflops"]


def test_fp8_is_faster_than_bf16_on_h100_but_not_twice() -> None:
    model, hw = load_model("llama-3.1-70b"), hardware_from_catalog("h100-sxm")
    cons = LayoutConstraints(
        tp=4, pp=4, dp=4, vpp=5, microbatch=1, recompute="none", zero=1, sequence_parallel=True
    )
    t = {
        dt: plan_training(
            model, hw, TrainJob(gpus=64, seq_len=4096, global_batch_seqs=128, dtype=dt), cons
        ).step_time_s
        for dt in ("bf16", "fp8")
    }
    assert 1.2 < t["bf16"] / t["fp8"] < 2.0


def test_more_microbatches_shrink_the_bubble_share() -> None:
    ctx_small = _ctx("llama-3.1-70b", 64, gbs=32)
    ctx_big = _ctx("llama-3.1-70b", 64, gbs=512)
    lay = Layout(tp=4, pp=8, dp=2, microbatch=1, recompute="full", zero=1)
    small = step_breakdown(ctx_small, lay, 16)
    big = step_breakdown(ctx_big, lay, 256)
    assert big.bubble / big.step_time_s < small.bubble / small.step_time_s
    # 1F1B bubble: (p-1)/m of the per-microbatch time (Narayanan et al. 2021 §2.2)
    per_mb = (small.step_time_s - small.bubble - small.dp_comm - small.optimizer - small.other) / 16
    assert small.bubble == pytest.approx(7 * per_mb, rel=1e-6)


def test_interleaving_shrinks_the_bubble() -> None:
    ctx = _ctx("llama-3.1-70b", 64, gbs=64)
    plain = Layout(tp=4, pp=8, dp=2, microbatch=1, recompute="full", zero=1)
    inter = Layout(tp=4, pp=8, dp=2, microbatch=1, recompute="full", zero=1, vpp=5)
    assert step_breakdown(ctx, inter, 32).bubble < step_breakdown(ctx, plain, 32).bubble


def test_tensor_parallel_across_nodes_costs_more_than_inside() -> None:
    ctx = _ctx("llama-3.1-70b", 64, gbs=64)
    inside = step_breakdown(ctx, Layout(tp=8, pp=1, dp=8, microbatch=1, recompute="full"), 8)
    across = step_breakdown(ctx, Layout(tp=16, pp=1, dp=4, microbatch=1, recompute="full"), 16)
    assert across.tp_comm / across.step_time_s > inside.tp_comm / inside.step_time_s


def test_expert_parallel_moe_has_all_to_all_time() -> None:
    ctx = _ctx("mixtral-8x7b", 64, gbs=256)
    lay = Layout(tp=1, pp=1, dp=64, ep=8, microbatch=1, recompute="full", zero=1)
    bd = step_breakdown(ctx, lay, 4)
    assert bd.ep_comm > 0
    no_ep = step_breakdown(
        ctx, Layout(tp=1, pp=1, dp=64, ep=1, microbatch=1, recompute="full", zero=1), 4
    )
    assert no_ep.ep_comm == 0
