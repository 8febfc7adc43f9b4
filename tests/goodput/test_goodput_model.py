"""The goodput planner: failure rates, checkpoint size and time, Young/Daly, restarts.

Golden numbers come from the published sources the catalog rows cite (Llama 3 s3.3.4 and
s3.3.1, the BLOOM checkpoint size); formula checks restate the model's definitions by hand.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from flopwise.catalog.goodput import failure_causes, failure_causes_from_file
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.goodput import (
    GoodputInputs,
    RestartCosts,
    Storage,
    goodput_from_plan_dict,
    plan_goodput,
    unexpected_per_day,
)
from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training
from flopwise.units import GB
from flopwise.workload import load_model


@pytest.fixture(scope="module")
def llama405_meta() -> object:
    """Llama 3 405B as Meta ran it: 16,384 H100, TP8 PP16 DP128, 8K sequences, 16M tokens
    per step (arXiv:2407.21783 Table 4), 15.6T tokens."""
    return plan_training(
        load_model("llama-3.1-405b"),
        hardware_from_catalog("h100-sxm"),
        TrainJob(gpus=16384, seq_len=8192, global_batch_seqs=2048, tokens=15.6e12),
        LayoutConstraints(tp=8, pp=16, dp=128, cp=1),
    )


def _tectonic() -> Storage:
    # Llama 3 s3.3.1: Tectonic sustains 2 TB/s, peaks at 7 TB/s
    return Storage(origin="test", aggregate_write_gbps=2000, aggregate_read_gbps=7000)


def test_llama3_interruptions_per_day_match_meta_at_16k_gpus() -> None:
    total, unexpected = unexpected_per_day(16384, 8, GoodputInputs())
    assert total == pytest.approx(466 / 54, rel=0.01)  # 466 interruptions in 54 days
    assert unexpected == pytest.approx(419 / 54, rel=0.01)  # 419 unexpected


def test_causes_carry_a_source_and_78pct_are_hardware() -> None:
    causes = failure_causes()
    assert all(c.source.startswith("https://") for c in causes)
    unexpected = [c for c in causes if c.kind == "unexpected"]
    assert sum(c.count for c in unexpected) == 419
    hardware = sum(c.count for c in unexpected if c.category in ("GPU", "Host", "Network"))
    # Llama 3 s3.3.4: "approximately 78% of the unexpected interruptions are attributed to
    # confirmed hardware issues" (host maintenance counted apart, as in Table 5)
    assert 0.70 <= hardware / 419 <= 0.80


def test_rates_scale_with_gpus_and_nodes() -> None:
    big, _ = unexpected_per_day(16384, 8, GoodputInputs())
    half, _ = unexpected_per_day(8192, 8, GoodputInputs())
    assert half == pytest.approx(big / 2, rel=1e-9)
    one_node, _ = unexpected_per_day(8, 8, GoodputInputs())
    assert one_node < 0.01  # one node: about one interruption every few months


def test_meta_goodput_in_published_range(llama405_meta: object) -> None:
    g = plan_goodput(llama405_meta, GoodputInputs(storage=_tectonic()))
    # "higher than 90% effective training time" (s3.3.4); not fitted: restart and checkpoint
    # costs come from PyTorch's NCCL timeout, FlashRecovery and the plan's own state
    assert g.goodput_fraction is not None and 0.90 <= g.goodput_fraction <= 1.0
    assert g.checkpoint_interval_s is not None and g.checkpoint_interval_s > 0
    assert g.checkpoint_stall_s is not None and g.checkpoint_stall_s > 0


def test_checkpoint_bytes_match_bloom_published_size() -> None:
    plan = plan_training(
        load_model("bloom-176b"),
        hardware_from_catalog("a100-sxm-80gb", "dgx-a100"),
        TrainJob(gpus=384, seq_len=2048, global_batch_seqs=2048, tokens=366e9),
        LayoutConstraints(tp=4, pp=12, dp=8),
    )
    g = plan_goodput(plan)
    # HF blog 'The Technology Behind BLOOM Training': 2.3 TB (bf16 weights + fp32 optimizer)
    assert g.checkpoint_bytes == pytest.approx(2.3e12, rel=0.10)


def test_young_daly_interval_and_write_time_from_definitions(llama405_meta: object) -> None:
    inputs = GoodputInputs(
        failures_per_gpu_day=1e-3,
        storage=Storage(origin="test", aggregate_write_gbps=100.0, aggregate_read_gbps=100.0),
    )
    g = plan_goodput(llama405_meta, inputs)
    params = 405.85e9  # Llama 3.1 405B, within 0.5%
    assert g.checkpoint_bytes == pytest.approx(params * (2 + 4 + 8), rel=0.005)
    write = g.checkpoint_bytes / (100.0 * GB)
    assert g.checkpoint_write_s == pytest.approx(write)
    mtbf_s = 86400 / (1e-3 * 16384)
    assert g.checkpoint_interval_s == pytest.approx(math.sqrt(2 * write * mtbf_s))
    assert g.job_mtbf_h == pytest.approx(mtbf_s / 3600)


def test_what_if_more_failures_slower_storage_cost_goodput(llama405_meta: object) -> None:
    base = plan_goodput(llama405_meta, GoodputInputs(storage=_tectonic()))
    flaky = plan_goodput(
        llama405_meta, GoodputInputs(storage=_tectonic(), failures_per_gpu_day=2e-3)
    )
    slow = plan_goodput(
        llama405_meta,
        GoodputInputs(storage=Storage(origin="t", aggregate_write_gbps=20.0)),
    )
    assert flaky.goodput_fraction < base.goodput_fraction  # type: ignore[operator]
    assert slow.goodput_fraction < base.goodput_fraction  # type: ignore[operator]
    assert slow.effective_train_days > base.effective_train_days  # type: ignore[operator]


def test_async_stalls_only_for_the_host_snapshot(llama405_meta: object) -> None:
    storage = Storage(origin="t", aggregate_write_gbps=50.0)
    sync = plan_goodput(llama405_meta, GoodputInputs(storage=storage))
    asyn = plan_goodput(llama405_meta, GoodputInputs(storage=storage, async_checkpoint=True))
    assert asyn.checkpoint_write_s == sync.checkpoint_write_s
    assert asyn.checkpoint_stall_s < sync.checkpoint_stall_s  # type: ignore[operator]
    assert asyn.goodput_fraction > sync.goodput_fraction  # type: ignore[operator]
    # the snapshot moves the GPU's own state over PCIe Gen5 x16 (64 GB/s one way)
    assert asyn.snapshot_s == pytest.approx(asyn.checkpoint_bytes_per_gpu / 64e9)


def test_restart_costs_are_overridable(llama405_meta: object) -> None:
    fast = GoodputInputs(storage=_tectonic(), restart=RestartCosts(detection_s=0, reschedule_s=0))
    slow = GoodputInputs(storage=_tectonic(), restart=RestartCosts(detection_s=3600))
    g_fast, g_slow = plan_goodput(llama405_meta, fast), plan_goodput(llama405_meta, slow)
    assert g_fast.restart_s < 60 < 3600 < g_slow.restart_s  # type: ignore[operator]
    assert g_fast.goodput_fraction > g_slow.goodput_fraction  # type: ignore[operator]


def test_small_job_goodput_near_one_and_says_so() -> None:
    plan = plan_training(
        load_model("llama-3.1-8b"),
        hardware_from_catalog("h100-sxm"),
        TrainJob(gpus=8, seq_len=4096, global_batch_seqs=256, tokens=2e9),
    )
    g = plan_goodput(plan)
    assert g.goodput_fraction is not None and g.goodput_fraction > 0.99
    assert any("near 1" in n for n in g.notes)
    # a run shorter than the Young/Daly interval checkpoints once, at most a run's length apart
    assert g.checkpoint_interval_s is not None and g.ideal_train_days is not None
    assert g.checkpoint_interval_s <= g.ideal_train_days * 86400 * (1 + 1e-9)


def test_never_finishes_when_failures_outrun_restarts(llama405_meta: object) -> None:
    g = plan_goodput(llama405_meta, GoodputInputs(failures_per_gpu_day=1.0))
    assert g.goodput_fraction == 0.0
    assert g.effective_train_days is None
    assert any("never finishes" in n for n in g.notes)


def test_first_order_plans_are_refused_with_one_line() -> None:
    with pytest.raises(FlopwiseError, match="recipe"):
        goodput_from_plan_dict({"gpus": 8, "params": 1e9}, GoodputInputs())


def test_users_failure_file(tmp_path: Path) -> None:
    f = tmp_path / "mine.csv"
    f.write_text(
        "profile,cause,category,kind,scales_with,count,observed_days,observed_gpus,"
        "observed_nodes,source,as_of\n"
        "ours,GPU,GPU,unexpected,gpu,10,10,1000,125,our logs,2026-01-01\n"
    )
    causes = failure_causes_from_file(str(f))
    total, _ = unexpected_per_day(2000, 8, GoodputInputs(causes=causes))
    assert total == pytest.approx(2.0)  # 1e-3 per GPU-day x 2000 GPUs
    bad = tmp_path / "bad.csv"
    bad.write_text("profile,cause\nx,y\n")
    with pytest.raises(FlopwiseError, match="missing column"):
        failure_causes_from_file(str(bad))
