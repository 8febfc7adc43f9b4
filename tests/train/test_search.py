"""Layout search: constraints respected, errors named, impossible jobs explained."""

from __future__ import annotations

import pytest

from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training
from flopwise.workload.hf import load_model


def test_given_flags_are_respected() -> None:
    cons = LayoutConstraints(tp=4, pp=2, recompute="selective", zero=1, sequence_parallel=True)
    plan = plan_training(
        load_model("llama-3.1-70b"),
        hardware_from_catalog("h100-sxm"),
        TrainJob(gpus=64, seq_len=4096, global_batch_seqs=256),
        cons,
    )
    lay = plan.best.layout
    assert (lay.tp, lay.pp, lay.recompute, lay.zero, lay.sequence_parallel) == (
        4,
        2,
        "selective",
        1,
        True,
    )
    assert lay.tp * lay.pp * lay.cp * lay.dp == 64
    for alt in plan.outcome.top:
        assert alt.layout.tp == 4 and alt.layout.pp == 2
    assert plan.fits is True


def test_search_returns_the_fastest_and_alternatives_are_sorted() -> None:
    plan = plan_training(
        load_model("llama-3.1-8b"),
        hardware_from_catalog("a100-sxm-80gb"),
        TrainJob(gpus=32, seq_len=4096, global_batch_seqs=256),
    )
    times = [c.step_time_s for c in plan.outcome.top]
    assert times == sorted(times)
    assert plan.outcome.evaluated >= plan.outcome.feasible > 0
    search = plan.to_dict()["search"]
    assert search["configs_evaluated"] == plan.outcome.evaluated
    assert len(search["top"]) <= 5


@pytest.mark.parametrize(
    ("cons", "message"),
    [
        (LayoutConstraints(tp=6), "tp=6 does not divide 64 heads"),
        (LayoutConstraints(cp=3), "cp=3 does not divide the sequence length 4096"),
        (LayoutConstraints(pp=128), "pp=128 exceeds the 80 layers"),
        (LayoutConstraints(ep=2), "ep=2 needs a mixture-of-experts model"),
        (LayoutConstraints(tp=8, pp=8, dp=8, cp=1), "is not the 64 GPUs"),
        (LayoutConstraints(tp=1, sequence_parallel=True), "sequence parallelism needs tp > 1"),
        (LayoutConstraints(pp=2, hsdp=True), "hsdp shards like ZeRO-3"),
    ],
)
def test_constraint_errors_name_the_constraint(cons: LayoutConstraints, message: str) -> None:
    with pytest.raises(FlopwiseError, match=message):
        plan_training(
            load_model("llama-3.1-70b"),
            hardware_from_catalog("h100-sxm"),
            TrainJob(gpus=64, seq_len=4096, global_batch_seqs=256),
            cons,
        )


def test_impossible_job_explains_minimum_resources() -> None:
    plan = plan_training(
        load_model("llama-3.1-405b"),
        hardware_from_catalog("a100-sxm-40gb"),
        TrainJob(gpus=8, seq_len=4096, global_batch_seqs=64),
    )
    assert plan.fits is False
    d = plan.to_dict()
    nothing = d["search"]["nothing_fits"]
    assert "GiB" in nothing["why"]
    assert any("GPUs" in w for w in nothing["what_would"])
    assert d["search"]["feasible"] == 0


def test_fixed_layout_that_does_not_fit_suggests_dropping_constraints() -> None:
    cons = LayoutConstraints(tp=1, pp=1, cp=1, zero=0, recompute="none")
    plan = plan_training(
        load_model("llama-3.1-70b"),
        hardware_from_catalog("h100-sxm"),
        TrainJob(gpus=64, seq_len=4096, global_batch_seqs=256),
        cons,
    )
    assert plan.fits is False
    what = " ".join(plan.to_dict()["search"]["nothing_fits"]["what_would"])
    assert "drop the fixed layout choices" in what


def test_objective_cost_never_costs_more_than_time() -> None:
    model, hw = load_model("llama-3.1-8b"), hardware_from_catalog("h100-sxm")
    job = TrainJob(
        gpus=256, seq_len=4096, global_batch_seqs=512, tokens=1e12, price_per_gpu_hour=2.0
    )
    fast = plan_training(model, hw, job)
    cheap = plan_training(model, hw, TrainJob(**{**_fields(job), "objective": "cost"}))
    assert cheap.cost_usd is not None and fast.cost_usd is not None
    assert cheap.cost_usd <= fast.cost_usd * (1 + 1e-9)
    assert cheap.job.gpus <= 256


def _fields(job: TrainJob) -> dict[str, object]:
    return {f: getattr(job, f) for f in job.__dataclass_fields__}


def test_plan_keys_stay_stable() -> None:
    d = plan_training(
        load_model("llama-3.1-8b"),
        hardware_from_catalog("h100-sxm"),
        TrainJob(gpus=8, seq_len=4096, global_batch_seqs=64, tokens=1e12, price_per_gpu_hour=2.5),
    ).to_dict()
    for key in (
        "params",
        "active_params",
        "total_flops",
        "gpus",
        "mfu",
        "train_days",
        "gpu_hours",
        "cost_usd",
        "memory_per_gpu_gib",
        "fits",
        "step_time_s",
        "breakdown",
        "tokens_per_s",
        "tflops_per_gpu",
        "hw_tflops_per_gpu",
        "hfu",
        "memory_breakdown",
        "search",
    ):
        assert key in d
    assert d["cost_usd"] == pytest.approx(d["gpu_hours"] * 2.5)
    assert d["train_days"] == pytest.approx(1e12 / d["tokens_per_s"] / 86400)


@pytest.mark.parametrize(
    "cons",
    [
        LayoutConstraints(microbatch=7),
        LayoutConstraints(vpp=21, pp=4),  # more virtual stages than the 20 layers per stage
        LayoutConstraints(vpp=2, pp=1),
        LayoutConstraints(tp=8, cp=16, pp=1),
    ],
)
def test_unsatisfiable_free_flags_give_a_one_line_error(cons: LayoutConstraints) -> None:
    with pytest.raises(FlopwiseError) as err:
        plan_training(
            load_model("llama-3.1-70b"),
            hardware_from_catalog("h100-sxm"),
            TrainJob(gpus=64, seq_len=4096, global_batch_seqs=256),
            cons,
        )
    assert "\n" not in str(err.value)


def test_an_interleaved_depth_that_does_not_divide_the_stage_runs_padded() -> None:
    # DeepSeek-V3's 61 layers over pp=2 at vpp=4 (Megatron-Bridge's GB300 layout, placed by
    # --pipeline-model-parallel-layout): the busiest stage runs 4 virtual stages of 8 layers
    from flopwise.plan.train.layout import stage_layers

    assert stage_layers(61, 2, 4) == 32
    assert stage_layers(61, 2, 1) == 31
    assert stage_layers(80, 4, 5) == 20  # dividing depths are unchanged
    job = TrainJob(gpus=64, seq_len=4096, global_batch_seqs=256)
    model, hw = load_model("llama-3.1-70b"), hardware_from_catalog("h100-sxm")
    fixed = dict(tp=8, pp=4, dp=2, cp=1, microbatch=1, recompute="full", zero=1)
    even = plan_training(model, hw, job, LayoutConstraints(vpp=5, **fixed))  # type: ignore[arg-type]
    padded = plan_training(model, hw, job, LayoutConstraints(vpp=7, **fixed))  # type: ignore[arg-type]
    assert padded.best.layout.vpp == 7
    # 7 virtual stages of 3 layers = 21 on the busiest stage against 20: slower, not refused
    assert padded.step_time_s > even.step_time_s
