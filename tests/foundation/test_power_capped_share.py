"""The power-capped share of a die's burst rate (plan/sustained.py POWER_CAPPED_SHARE): the
constants against the H100 logs they were read from, and where each planner uses them (serving
engines on a measured die; training steps keep the fitted fraction)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan import sustained
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import get_engine
from flopwise.plan.infer.latency import make_rates
from flopwise.plan.roofline import achievable_matmul_tflops
from flopwise.plan.sustained import (
    POWER_CAPPED_SHARE,
    SUSTAINED_COMPUTE_FRACTION,
    power_clock_share,
    serving_compute_share,
    sustained_gemm_fraction,
)
from flopwise.workload.hf import load_model

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks/device/results/h100-2026-11-23"
TRT = get_engine("tensorrt-llm")


def _sustained_mean_tflops(workload: str) -> float:
    rates = [
        float(line.split()[3])
        for line in (RESULTS / "sustained.txt").read_text().splitlines()
        if line.split() and line.split()[0] == workload
    ]
    assert len(rates) >= 10  # 30 s in 2 s windows
    return sum(rates) / len(rates)


def _burst_mamf_tflops() -> float:
    match = re.search(r"best ([\d.]+) TFLOPS", (RESULTS / "log_round2.txt").read_text())
    assert match is not None
    return float(match.group(1))


def _burst_attention_tflops(backend: str, seq_len: int) -> float:
    with (RESULTS / "attention.csv").open() as fh:
        row = next(
            r
            for r in csv.DictReader(fh)
            if r["backend"] == backend and int(r["seq_len"]) == seq_len
        )
    fwd, bwd = float(row["fwd_tflops"]), float(row["bwd_tflops"])
    # forward + backward over the same FLOP count the sustained loop uses (backward 2.5x)
    return 3.5 / (1.0 / fwd + 2.5 / bwd)


def test_gh100_shares_are_the_logged_sustained_rates_over_the_burst_ones() -> None:
    gemm = _sustained_mean_tflops("gemm") / _burst_mamf_tflops()
    attention = _sustained_mean_tflops("cudnn") / _burst_attention_tflops("cudnn", 32768)
    assert POWER_CAPPED_SHARE["gh100"]["gemm"] == pytest.approx(gemm, rel=2e-3)
    assert POWER_CAPPED_SHARE["gh100"]["attention"] == pytest.approx(attention, rel=2e-3)
    # the power cap costs a GEMM-bound GPU ~21%, attention (less power per clock) ~3%
    assert 0.75 < gemm < 0.82 < 0.95 < attention < 1.0


def test_a_power_cap_alone_loses_less_than_a_training_step() -> None:
    """The fitted training fraction holds the power cap and training-only losses on top."""
    assert POWER_CAPPED_SHARE["gh100"]["gemm"] > SUSTAINED_COMPUTE_FRACTION["gh100"]


def test_serving_on_a_measured_die_runs_gemms_at_the_power_capped_share() -> None:
    hw = hardware_from_catalog("h100-sxm")
    share, basis = serving_compute_share(hw, "gemm")
    assert (share, basis) == (POWER_CAPPED_SHARE["gh100"]["gemm"], "power-capped")
    rates = make_rates(hw, TRT, "bf16", "bf16")
    assert rates.gemm_flops_s == pytest.approx(
        achievable_matmul_tflops(hw, "bf16") * 1e12 * share, rel=1e-12
    )
    assert rates.compute_share_basis == "power-capped"
    # the training step's GEMMs keep the fitted fraction
    assert sustained_gemm_fraction(hw) == SUSTAINED_COMPUTE_FRACTION["gh100"]


def test_a_part_capped_below_its_die_is_slowed_as_in_training() -> None:
    hw = hardware_from_catalog("h100-hbm2e-96gb")  # Grand Teton's 500 W H100
    assert power_clock_share(hw) < 1.0
    share, _ = serving_compute_share(hw, "gemm")
    assert share == pytest.approx(POWER_CAPPED_SHARE["gh100"]["gemm"] * power_clock_share(hw))


def test_dies_without_a_measurement_keep_their_training_fraction() -> None:
    for accelerator in ("a100-sxm-80gb", "b200", "mi300x"):
        hw = hardware_from_catalog(accelerator)
        for kind in ("gemm", "attention"):
            assert serving_compute_share(hw, kind) == (sustained_gemm_fraction(hw), "training")


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="'gemm' or 'attention'"):
        serving_compute_share(hardware_from_catalog("h100-sxm"), "softmax")


def test_the_plan_says_which_share_its_gemms_run_at(monkeypatch: pytest.MonkeyPatch) -> None:
    job = InferJob(input_len=2048, output_len=128, batch=8, engine="tensorrt-llm")
    spec = load_model("llama-3.1-8b")
    h100 = plan_inference(spec, hardware_from_catalog("h100-sxm"), job)
    a100 = plan_inference(spec, hardware_from_catalog("a100-sxm-80gb"), job)
    assert any("POWER_CAPPED_SHARE" in a for a in h100.assumptions)
    assert any("the die's training fraction" in a for a in a100.assumptions)
    # without the measurement the die's training fraction prices the same prefill slower
    monkeypatch.setattr(sustained, "POWER_CAPPED_SHARE", {})
    at_training = plan_inference(spec, hardware_from_catalog("h100-sxm"), job)
    assert at_training.ttft_s > 1.03 * h100.ttft_s
