"""A serving plan's prefill attention is priced by the same kernel model as a training step:
the fused kernel measured on the device (`bench attention`) or its die (GH100), by the prompt's
length, x the share attention keeps under sustained load (the die's measured power-capped
share, else its training fraction); devices with no timed kernel keep the engine's fraction of
their GEMM ceiling."""

from __future__ import annotations

from pathlib import Path

import pytest

from flopwise.hardware import hardware_for, hardware_from_catalog
from flopwise.plan.efficiency import gh100_attention_fraction
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import FP8_ATTENTION_SPEEDUP, get_engine
from flopwise.plan.infer.latency import make_rates
from flopwise.plan.sustained import POWER_CAPPED_SHARE, serving_compute_share
from flopwise.results.store import ResultStore
from flopwise.workload.hf import load_model

TRT = get_engine("tensorrt-llm")
LLAMA_8B = load_model("llama-3.1-8b")  # head dim 128: the curves' reference, no head-dim scaling


def test_h100_prefill_attention_follows_the_die_curve_by_prompt_length() -> None:
    hw = hardware_from_catalog("h100-sxm")
    short = make_rates(hw, TRT, "bf16", "bf16", LLAMA_8B, 2048)
    long = make_rates(hw, TRT, "bf16", "bf16", LLAMA_8B, 20000)
    assert short.attn_basis == long.attn_basis == "die"
    # the kernel's fixed cost per query block weighs less over more keys
    assert long.attn_flops_s / short.attn_flops_s == pytest.approx(
        gh100_attention_fraction("flash", "fwd", 20000)
        / gh100_attention_fraction("flash", "fwd", 2048),
        rel=1e-9,
    )
    # the training step's curve x the share cuDNN attention kept under the H100's power cap
    expected = (
        hw.peak("bf16") * 1e12 * gh100_attention_fraction("flash", "fwd", 2048)
        * POWER_CAPPED_SHARE["gh100"]["attention"]
    )  # fmt: skip
    assert short.attn_flops_s == pytest.approx(expected, rel=1e-9)
    # FP8 context attention (trtllm-bench's FP8 builds) keeps its speedup on top
    fp8 = make_rates(hw, TRT, "fp8", "fp8", LLAMA_8B, 2048)
    assert fp8.attn_flops_s / short.attn_flops_s == pytest.approx(
        FP8_ATTENTION_SPEEDUP, rel=0.05
    )  # the head-dim factor moves a little with the faster matmuls


def test_devices_with_no_timed_kernel_keep_the_engine_fraction() -> None:
    hw = hardware_from_catalog("mi300x")
    rates = [make_rates(hw, TRT, "bf16", "bf16", LLAMA_8B, n) for n in (None, 512, 2048, 32768)]
    assert {r.attn_basis for r in rates} == {"engine"}
    assert len({r.attn_flops_s for r in rates}) == 1


def test_a_bench_attention_curve_prices_serving_prefill(tmp_path: Path) -> None:
    """Measurement feeds the serving plan: a stored `bench attention` curve on MI300X (no die
    curve of its own) replaces the engine's fraction, and the plan says where its rate came
    from."""
    db = str(tmp_path / "r.sqlite")
    catalog = hardware_from_catalog("mi300x")
    ResultStore(db).add(
        "attention",
        {"dtype": "bf16", "head_dim": 128, "backend": "auto",
         "fwd_tflops_inf": 300.0, "fwd_s_half": 1000.0, "bwd_tflops_inf": 250.0,
         "bwd_s_half": 0.0},
        {}, accelerator="mi300x",
    )  # fmt: skip
    hw = hardware_for("mi300x", None, "latest", db)
    r = make_rates(hw, TRT, "bf16", "bf16", LLAMA_8B, 3000)
    assert r.attn_basis == "measured"
    rate = 300e12 * 3000 / (3000 + 1000)
    share, basis = serving_compute_share(hw, "attention")
    assert basis == "training"  # no sustained-load measurement of CDNA3
    assert r.attn_flops_s == pytest.approx(rate * share, rel=1e-9)

    job = InferJob(input_len=16384, output_len=16, batch=1, engine="tensorrt-llm")
    measured = plan_inference(LLAMA_8B, hw, job)
    planned = plan_inference(LLAMA_8B, catalog, job)
    # the slower measured kernel makes a long prompt's first token later
    assert measured.ttft_s > planned.ttft_s
    assert any("bench attention" in a for a in measured.assumptions)
    assert not any("prefill attention at" in a for a in planned.assumptions)
