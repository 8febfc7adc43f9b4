"""Sliding-window layers run their attention kernel over the window (plan/attention_rate.py
model_attention_rate): their query blocks' fixed cost weighs against ~window keys of work, so on
a device whose rate depends on length they run slower than full layers of the same sequence."""

from __future__ import annotations

import dataclasses

import pytest

from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.attention_rate import (
    fused_attention_rate,
    local_kernel_length,
    model_attention_rate,
)
from flopwise.plan.efficiency import gh100_attention_fraction
from flopwise.plan.infer.constants import get_engine
from flopwise.plan.infer.latency import make_rates
from flopwise.plan.infer.shard import mean_decode_keys, prefill_pairs
from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training
from flopwise.workload.flops import (
    attention_flops_at_context,
    attention_flops_per_token,
    causal_attention_split,
    local_pairs,
)
from flopwise.workload.hf import load_model
from flopwise.workload.spec import ModelSpec

FIXED = LayoutConstraints(tp=1, pp=1, dp=8, cp=1, vpp=1, microbatch=1, recompute="none", zero=1)
H100_PEAK16 = 989.4e12


def _with_window(spec: ModelSpec, window: int, sliding_layers: int) -> ModelSpec:
    return dataclasses.replace(spec, sliding_window=window, sliding_layers=sliding_layers)


def test_kernel_length_is_twice_the_window_within_the_sequence() -> None:
    assert local_kernel_length(4096, 0) == 4096  # full attention
    assert local_kernel_length(4096, 128) == 256  # w keys per query; causal s visits s/2
    assert local_kernel_length(4096, 3000) == 4096  # never above the sequence


def test_split_by_hand() -> None:
    llama = load_model("llama-3.1-8b")
    assert [(p.share, p.window) for p in causal_attention_split(llama, 8192)] == [(1.0, 0)]
    spec = _with_window(dataclasses.replace(llama, layers=2), 128, 1)
    (full, w0), (sliding, w1) = ((p.share, p.window) for p in causal_attention_split(spec, 4096))
    # causal mean keys: (s + 1) / 2 for the full layer; 128 * 129 / 2 + (4096 - 128) * 128 over
    # 4096 positions for the windowed one
    keys_full = 4097 / 2
    keys_sliding = (128 * 129 / 2 + (4096 - 128) * 128) / 4096
    assert sliding == pytest.approx(keys_sliding / (keys_full + keys_sliding))
    assert full + sliding == pytest.approx(1.0)
    assert (w0, w1) == (0, 128)
    # the split agrees with the FLOP count the step charges
    assert attention_flops_per_token(spec, 4096, "causal") == pytest.approx(
        attention_flops_per_token(dataclasses.replace(spec, sliding_layers=0), 4096, "causal")
        * (1 + keys_sliding / keys_full)
        / 2
    )
    # a window as long as the sequence is full attention
    assert len(causal_attention_split(_with_window(llama, 8192, 16), 8192)) == 1


def test_gh100_rate_combines_the_layer_kinds_harmonically() -> None:
    hw = hardware_from_catalog("h100-sxm")
    spec = _with_window(load_model("llama-3.1-8b"), 128, 16)  # head dim 128: factor 1
    f_full, f_sliding = (p.share for p in causal_attention_split(spec, 4096))
    for direction in ("fwd", "bwd"):
        rate = model_attention_rate(hw, "flash", direction, 4096, H100_PEAK16, spec)
        expected = 1.0 / (
            f_full / gh100_attention_fraction("flash", direction, 4096)
            + f_sliding / gh100_attention_fraction("flash", direction, 256)
        )
        assert rate.basis == "die"
        assert rate.fraction == pytest.approx(expected)
        plain = fused_attention_rate(hw, "flash", direction, 4096, H100_PEAK16, 128)
        assert rate.fraction < plain.fraction
    # the backward's larger fixed cost makes the window hurt it more
    fwd = model_attention_rate(hw, "flash", "fwd", 4096, H100_PEAK16, spec).fraction
    bwd = model_attention_rate(hw, "flash", "bwd", 4096, H100_PEAK16, spec).fraction
    plain_fwd = fused_attention_rate(hw, "flash", "fwd", 4096, H100_PEAK16, 128).fraction
    plain_bwd = fused_attention_rate(hw, "flash", "bwd", 4096, H100_PEAK16, 128).fraction
    assert bwd / plain_bwd < fwd / plain_fwd


def test_context_parallel_chunk_sets_the_kernel_length() -> None:
    hw = hardware_from_catalog("h100-sxm")
    spec = _with_window(load_model("llama-3.1-8b"), 4096, 16)
    # 32k tokens over CP 8: 4k-token chunks, shorter than twice the window
    rate = model_attention_rate(hw, "flash", "bwd", 32768, H100_PEAK16, spec, kernel_len=4096)
    assert rate.fraction == pytest.approx(gh100_attention_fraction("flash", "bwd", 4096))


def test_constant_fraction_devices_are_unchanged() -> None:
    # the papers' fractions (an A100; the Blackwell dies take NVIDIA's timed curve since
    # 2026-11-29, tests/foundation/test_blackwell_attention.py): no length dependence
    hw = hardware_from_catalog("a100-sxm-80gb")
    spec = _with_window(load_model("llama-3.1-8b"), 128, 16)
    for direction in ("fwd", "bwd"):
        rate = model_attention_rate(hw, "flash", direction, 8192, 312e12, spec)
        plain = fused_attention_rate(hw, "flash", direction, 8192, 312e12, 128)
        assert rate.basis == plain.basis == "papers"
        assert rate.fraction == pytest.approx(plain.fraction)


def test_training_step_prices_the_windowed_layers_slower() -> None:
    hw = hardware_from_catalog("h100-sxm", "dgx-h100")
    job = TrainJob(gpus=8, seq_len=8192, global_batch_seqs=64)
    base = load_model("llama-3.1-8b")
    windowed = _with_window(base, 512, 16)
    step = plan_training(windowed, hw, job, FIXED).best.step
    full = plan_training(base, hw, job, FIXED).best.step
    flops_w = attention_flops_per_token(windowed, 8192, "causal")
    flops_full = attention_flops_per_token(base, 8192, "causal")
    # fewer FLOPs than full attention, each slower: between the forward's and the backward's
    # harmonic slow-down of the windowed share (kernel length 1024 instead of 8192)
    share_full, share_sliding = (p.share for p in causal_attention_split(windowed, 8192))
    bounds = [
        share_full
        + share_sliding
        * gh100_attention_fraction("flash", d, 8192)
        / gh100_attention_fraction("flash", d, 1024)
        for d in ("fwd", "bwd")
    ]
    per_flop = (step.attention / flops_w) / (full.attention / flops_full)
    assert step.attention < full.attention
    assert 1.0 < bounds[0] < per_flop < bounds[1]


def test_serving_prefill_rate_of_a_windowed_model() -> None:
    hw = hardware_from_catalog("h100-sxm")
    trt = get_engine("tensorrt-llm")
    base = load_model("llama-3.1-8b")
    full = make_rates(hw, trt, "bf16", "bf16", base, 8192)
    windowed = make_rates(hw, trt, "bf16", "bf16", _with_window(base, 256, 16), 8192)
    expected = model_attention_rate(
        hw, "flash", "fwd", 8192, H100_PEAK16, _with_window(base, 256, 16)
    ).fraction / gh100_attention_fraction("flash", "fwd", 8192)
    assert windowed.attn_flops_s == pytest.approx(full.attn_flops_s * expected, rel=1e-6)
    assert windowed.attn_flops_s < full.attn_flops_s


# --- Llama 4's chunked attention: causal inside fixed chunks, not a sliding window ---


def _brute_keys(position: int, window: int, chunked: bool) -> int:
    """Keys the query at 1-based `position` sees in a local layer, counted one by one."""
    if chunked:
        start = (position - 1) // window * window + 1
        return sum(1 for k in range(start, position + 1))
    return sum(1 for k in range(max(1, position - window + 1), position + 1))


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("n", [1, 100, 128, 129, 300, 1000])
def test_local_pairs_count_every_query(n: int, chunked: bool) -> None:
    assert local_pairs(n, 128, chunked) == sum(
        _brute_keys(p, 128, chunked) for p in range(1, n + 1)
    )


def test_llama4_layers_are_chunked() -> None:
    scout = load_model("llama-4-scout")
    assert scout.local_attention == "chunked"
    assert load_model("gpt-oss-120b").local_attention == "sliding"
    with pytest.raises(FlopwiseError, match="local_attention"):
        dataclasses.replace(scout, local_attention="strided")


def test_chunked_layers_see_half_a_window_on_average() -> None:
    scout = load_model("llama-4-scout")  # 36 of 48 layers chunked in 8,192-token chunks
    sliding = dataclasses.replace(scout, local_attention="sliding")
    seq = 16 * 8192
    local = attention_flops_per_token(scout, seq, "causal") - attention_flops_per_token(
        dataclasses.replace(scout, sliding_layers=0, layers=12), seq, "causal"
    )
    slid = attention_flops_per_token(sliding, seq, "causal") - attention_flops_per_token(
        dataclasses.replace(scout, sliding_layers=0, layers=12), seq, "causal"
    )
    # (c + 1) / 2 keys per query against about c for a window of c
    assert local / slid == pytest.approx(
        (8193 / 2) / ((8192 * 8193 / 2 + (seq - 8192) * 8192) / seq), rel=1e-9
    )
    # a new token at the start of a chunk sees itself only in the chunked layers
    full = attention_flops_at_context(dataclasses.replace(scout, sliding_layers=0), 8193)
    assert attention_flops_at_context(scout, 8193) == pytest.approx(
        full * (12 * 8193 + 36 * 1) / (48 * 8193)
    )


@pytest.mark.parametrize("local_attention", ["sliding", "chunked"])
def test_decode_keys_are_the_mean_over_the_generation(local_attention: str) -> None:
    spec = dataclasses.replace(
        load_model("llama-4-scout"), local_attention=local_attention, sliding_window=512
    )
    chunked = local_attention == "chunked"
    for input_len, output_len in ((100, 300), (400, 500), (600, 1500), (2000, 10)):
        _, local = mean_decode_keys(spec, input_len, output_len)
        positions = range(input_len + 1, input_len + max(1, output_len - 1) + 1)
        expected = sum(_brute_keys(p, 512, chunked) for p in positions) / len(positions)
        assert local == pytest.approx(expected)
        assert prefill_pairs(spec, input_len)[1] == pytest.approx(
            sum(_brute_keys(p, 512, chunked) for p in range(1, input_len + 1))
        )


def test_chunk_kernel_is_a_causal_kernel_over_the_chunk() -> None:
    assert local_kernel_length(131072, 8192, chunked=True) == 8192
    assert local_kernel_length(4096, 8192, chunked=True) == 4096
    hw = hardware_from_catalog("h100-sxm")
    scout = load_model("llama-4-scout")
    parts = causal_attention_split(scout, 65536)
    assert parts[1].chunked and parts[1].window == 8192
    rate = model_attention_rate(hw, "flash", "bwd", 65536, H100_PEAK16, scout)
    expected = 1.0 / (
        parts[0].share / gh100_attention_fraction("flash", "bwd", 65536)
        + parts[1].share / gh100_attention_fraction("flash", "bwd", 8192)
    )
    # Scout's head dimension is 128: no head-dimension factor
    assert rate.fraction == pytest.approx(expected)
