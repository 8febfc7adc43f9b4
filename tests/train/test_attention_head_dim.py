"""Fused attention by head dimension (plan/attention_head_dim.py): the exponential-to-matmul
ratio from the architecture, the factor it gives, and its use in training and serving plans."""

from __future__ import annotations

import dataclasses

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.attention_head_dim import exp_to_matmul_ratio, head_dim_factor
from flopwise.plan.infer.constants import get_engine
from flopwise.plan.infer.latency import make_rates
from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training
from flopwise.workload.hf import load_model

FIXED = LayoutConstraints(tp=1, pp=1, dp=8, cp=1, vpp=1, microbatch=1, recompute="none", zero=1)


def test_ratio_is_the_flashattention3_papers_half_on_h100() -> None:
    # "exponential can take 50% of the cycle time compared to matmul" at head dim 128 on H100
    assert exp_to_matmul_ratio("h100-sxm") == pytest.approx(0.5)
    assert exp_to_matmul_ratio("h200-sxm") == pytest.approx(0.5)
    # A100's tensor cores are half as fast per clock, with the same exponential units
    assert exp_to_matmul_ratio("a100-sxm-80gb") == pytest.approx(0.25)
    # Blackwell doubles the tensor cores again; Blackwell Ultra doubles the exponentials back
    assert exp_to_matmul_ratio("b200") == pytest.approx(1.0)
    assert exp_to_matmul_ratio("gb300") == pytest.approx(0.5 * exp_to_matmul_ratio("gb200"))
    # unknown architecture numbers: no head-dimension effect priced
    assert exp_to_matmul_ratio("tpu-v5e") == 0.0
    assert exp_to_matmul_ratio("mi300x") == 0.0


@pytest.mark.parametrize("hw", ["a100-sxm-80gb", "h100-sxm", "b200", "gb300"])
def test_factor_is_one_at_128_and_grows_with_the_head(hw: str) -> None:
    assert head_dim_factor(hw, 128) == pytest.approx(1.0)
    fwd = [head_dim_factor(hw, d) for d in (32, 64, 96, 128, 192, 256)]
    assert fwd == sorted(fwd) and fwd[0] < 1.0 < fwd[-1]
    # the backward does 2.5x the matmul work per exponential: a smaller effect
    assert head_dim_factor(hw, 64) < head_dim_factor(hw, 64, direction="bwd") < 1.0
    # FP8 matmuls make the exponentials weigh more
    assert head_dim_factor(hw, 64, matmul_speedup=1.6) < head_dim_factor(hw, 64)


def test_factor_on_h100_by_hand() -> None:
    # g(64) = 0.5 * 1.5 / (0.5 + 0.5); MLA's 192/128 heads count as their mean, 160
    assert head_dim_factor("h100-sxm", 64) == pytest.approx(0.75)
    assert head_dim_factor("h100-sxm", 192, 128) == pytest.approx(1.25 * 1.5 / 1.75)
    assert head_dim_factor("tpu-v6e", 64) == 1.0
    with pytest.raises(ValueError, match="direction"):
        head_dim_factor("h100-sxm", 64, direction="both")


def _halved_heads(name: str) -> object:
    """The model with twice the heads at half the head dimension: the same attention FLOPs."""
    m = load_model(name)
    return dataclasses.replace(
        m,
        heads=2 * m.heads,
        kv_heads=2 * m.kv_heads,
        head_dim=m.head_dim // 2,
        v_head_dim=m.v_head_dim // 2,
    )


def test_training_attention_at_head_dim_64_is_slower_by_the_factor() -> None:
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    job = TrainJob(gpus=8, seq_len=16384, global_batch_seqs=64)
    base = plan_training(load_model("llama-3.1-8b"), hw, job, FIXED).best.step
    small = plan_training(_halved_heads("llama-3.1-8b"), hw, job, FIXED).best.step  # type: ignore[arg-type]
    # same FLOPs; the attention core's time grows by between 1/g_bwd and 1/g_fwd
    ratio = small.attention / base.attention
    lo = 1.0 / head_dim_factor("h100-sxm", 64, direction="bwd")
    hi = 1.0 / head_dim_factor("h100-sxm", 64)
    assert lo < ratio < hi
    # and nothing else moved more than the attention did
    assert small.step_time_s - base.step_time_s == pytest.approx(
        small.attention - base.attention, rel=0.05
    )


def test_training_on_a_die_without_architecture_numbers_is_unchanged() -> None:
    hw = hardware_from_catalog("tpu-v5p")
    job = TrainJob(gpus=8, seq_len=8192, global_batch_seqs=64, framework="maxtext")
    base = plan_training(load_model("llama-3.1-8b"), hw, job, FIXED).best.step
    small = plan_training(_halved_heads("llama-3.1-8b"), hw, job, FIXED).best.step  # type: ignore[arg-type]
    assert small.attention == pytest.approx(base.attention, rel=1e-9)


def test_serving_prefill_attention_rate_follows_the_head_dimension() -> None:
    hw = hardware_from_catalog("h100-sxm")
    trt = get_engine("tensorrt-llm")
    plain = make_rates(hw, trt, "bf16", "bf16")
    at128 = make_rates(hw, trt, "bf16", "bf16", load_model("llama-3.1-8b"))
    at64 = make_rates(hw, trt, "bf16", "bf16", _halved_heads("llama-3.1-8b"))  # type: ignore[arg-type]
    assert at128.attn_flops_s == pytest.approx(plain.attn_flops_s)
    assert at64.attn_flops_s == pytest.approx(0.75 * plain.attn_flops_s)
    # FP8 context attention: faster matmuls, the exponentials weigh more
    fp8 = make_rates(hw, trt, "fp8", "fp8", _halved_heads("llama-3.1-8b"))  # type: ignore[arg-type]
    fp8_plain = make_rates(hw, trt, "fp8", "fp8")
    assert fp8.attn_flops_s / fp8_plain.attn_flops_s < 0.75


def test_blackwell_ultra_forward_gain_bounds_nvidias_published_35_percent() -> None:
    """NVIDIA ("Making Softmax More Efficient with NVIDIA Blackwell Ultra", 2026) measured ~35%
    more FP8 attention-forward throughput for DeepSeek-V3 on GB300 than on GB200, from the
    doubled exponential units alone. Without overlap the model's time per score is
    d/128 + beta (FP8 matmuls at twice the 16-bit rate double beta), so the gain it implies for
    MLA's 160-wide mean head is an upper bound on the measured one, and near it."""
    x = (192 + 128) / 2 / 128
    gain = (x + 2 * exp_to_matmul_ratio("gb200")) / (x + 2 * exp_to_matmul_ratio("gb300"))
    assert 1.35 <= gain <= 1.35 * 1.10
