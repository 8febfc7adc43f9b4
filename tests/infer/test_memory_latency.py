"""Memory and latency model of the inference planner: physics checks that could fail."""

from __future__ import annotations

import pytest

from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import get_engine
from flopwise.plan.infer.latency import make_rates, shape_efficiency
from flopwise.plan.infer.memory import kv_bytes_per_seq_per_gpu
from flopwise.plan.infer.shard import (
    expected_distinct_experts,
    make_shard,
    mean_decode_keys,
)
from flopwise.plan.roofline import gemm_shape_efficiency
from flopwise.units import GB, GIB
from flopwise.workload import count_params, load_model


def test_kv_cache_counts_kv_heads_only_and_splits_over_tp() -> None:
    spec = load_model("llama-2-70b")  # 64 query heads, 8 KV heads, head_dim 128, 80 layers
    one = make_shard(spec, 1, 1, "bf16", "bf16")
    assert one.kv_per_token_layer_bytes == 8 * 2 * 128 * 2  # K and V, 8 heads, 2 bytes
    assert kv_bytes_per_seq_per_gpu(one, 1000) == pytest.approx(1000 * 80 * 4096)
    four = make_shard(spec, 4, 1, "bf16", "bf16")
    assert four.kv_per_token_layer_bytes == one.kv_per_token_layer_bytes / 4
    # 16 ranks but only 8 KV heads: each rank keeps a whole head (replicated), not half of one
    sixteen = make_shard(spec, 16, 1, "bf16", "bf16")
    assert sixteen.kv_per_token_layer_bytes == one.kv_per_token_layer_bytes / 8
    fp8 = make_shard(spec, 1, 1, "fp8", "fp8")
    assert fp8.kv_per_token_layer_bytes == one.kv_per_token_layer_bytes / 2


def test_mla_latent_is_not_split_by_tp() -> None:
    spec = load_model("deepseek-v3")
    one = make_shard(spec, 1, 1, "fp8", "bf16")
    eight = make_shard(spec, 8, 1, "fp8", "bf16")
    assert one.kv_per_token_layer_bytes == (spec.kv_lora_rank + spec.qk_rope_head_dim) * 2
    assert eight.kv_per_token_layer_bytes == one.kv_per_token_layer_bytes


def test_mlp_widths_come_from_the_config() -> None:
    spec = load_model("llama-2-7b")
    sh = make_shard(spec, 2, 1, "bf16", "bf16")
    assert sh.mlp_up_out == 2 * 11008 // 2  # gate + up, 11008 wide, split over 2 ranks
    assert sh.mlp_down_in == 11008 // 2
    assert sh.qkv_out == (32 * 128 + 2 * 32 * 128) // 2


def test_expected_distinct_experts() -> None:
    assert expected_distinct_experts(8, 2, 1) == pytest.approx(2.0)
    assert expected_distinct_experts(8, 2, 4) == pytest.approx(8 * (1 - 0.75**4))
    assert expected_distinct_experts(128, 8, 10_000) == pytest.approx(128.0)


def test_decode_is_charged_the_mean_kv_of_the_generation() -> None:
    spec = load_model("llama-2-7b")
    full, sliding = mean_decode_keys(spec, 1000, 201)
    assert full == pytest.approx((1001 + 1200) / 2)  # 200 decode steps, contexts 1001..1200
    assert sliding == full
    gpt_oss = load_model("gpt-oss-20b")  # 128-token window on half the layers
    full, capped = mean_decode_keys(gpt_oss, 6000, 101)
    assert (full, capped) == (6050.5, 128)


def test_batch1_decode_is_bounded_by_weight_bandwidth() -> None:
    spec = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm")
    plan = plan_inference(spec, hw, InferJob(input_len=128, output_len=128, batch=1))
    weights = count_params(spec).total * 2
    floor_s = weights / (hw.memory_bw_gbps * GB)  # 100% of peak: impossible to beat
    assert plan.tpot_s > floor_s
    assert plan.tpot_s < 1.6 * floor_s
    assert plan.mbu is not None and 0.5 < plan.mbu < 0.95
    step = plan.decode.breakdown
    assert step.total_s == pytest.approx(plan.tpot_s)
    assert step.weights_s > 5 * (step.kv_s + step.compute_s + step.comm_s)


def test_large_batch_decode_becomes_compute_and_kv_bound() -> None:
    spec = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm")
    small = plan_inference(spec, hw, InferJob(input_len=1024, output_len=256, batch=1))
    big = plan_inference(spec, hw, InferJob(input_len=1024, output_len=256, batch=128))
    assert big.output_tokens_per_s > 25 * small.output_tokens_per_s
    assert big.tpot_s > small.tpot_s
    assert big.decode.breakdown.kv_s > big.decode.breakdown.weights_s * 0.5


def test_int4_weight_only_speeds_decode_but_not_prefill() -> None:
    spec = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("a100-sxm-80gb")
    job = InferJob(input_len=2048, output_len=128, batch=1)
    bf16 = plan_inference(spec, hw, job)
    from dataclasses import replace

    int4 = plan_inference(spec, hw, replace(job, weight_dtype="int4"))
    assert int4.precision.mode == "weight-only"
    assert int4.precision.act == "bf16"
    assert int4.tpot_s < 0.5 * bf16.tpot_s
    assert int4.ttft_s == pytest.approx(bf16.ttft_s, rel=0.1)


def test_fp8_is_weight_and_activation_on_hopper_weight_only_on_ampere() -> None:
    spec = load_model("llama-3.1-8b")
    job = InferJob(input_len=512, output_len=64, batch=8, weight_dtype="fp8")
    h100 = plan_inference(spec, hardware_from_catalog("h100-sxm"), job)
    a100 = plan_inference(spec, hardware_from_catalog("a100-sxm-80gb"), job)
    assert (h100.precision.mode, h100.precision.act) == ("weight+activation", "fp8")
    assert (a100.precision.mode, a100.precision.act) == ("weight-only", "bf16")


def test_tp_adds_allreduce_time_and_cuts_weight_time() -> None:
    spec = load_model("llama-3.1-70b")
    hw = hardware_from_catalog("h100-sxm")
    two = plan_inference(spec, hw, InferJob(input_len=1024, output_len=64, batch=1, tp=2))
    eight = plan_inference(spec, hw, InferJob(input_len=1024, output_len=64, batch=1, tp=8))
    assert eight.decode.breakdown.weights_s < 0.3 * two.decode.breakdown.weights_s
    assert eight.decode.breakdown.comm_s > two.decode.breakdown.comm_s > 0
    # 160 all-reduces of a few KB: latency-bound, tens of microseconds each at most
    assert eight.decode.breakdown.comm_s < 160 * 60e-6


def test_memory_per_gpu_and_fit() -> None:
    spec = load_model("llama-3.1-70b")
    hw = hardware_from_catalog("h100-sxm")
    plan = plan_inference(spec, hw, InferJob(input_len=2048, output_len=256, batch=32, tp=4))
    weights_gib = count_params(spec).total * 2 / 4 / GIB
    assert plan.memory.weights_bytes / GIB == pytest.approx(weights_gib, rel=0.01)
    kv = 32 * 2304 * 80 * 8 * 256 * 2 / 4
    assert plan.memory.kv_bytes == pytest.approx(kv)
    assert plan.fits is True
    assert plan.memory.max_batch is not None and plan.memory.max_batch > 32
    big = plan_inference(spec, hw, InferJob(input_len=2048, output_len=256, batch=4096, tp=4))
    assert big.fits is False
    assert big.suggestion and "largest batch" in big.suggestion


def test_no_fit_at_any_batch_names_gpus_or_dtype() -> None:
    spec = load_model("llama-3.1-70b")
    hw = hardware_from_catalog("h100-sxm")
    plan = plan_inference(spec, hw, InferJob(input_len=1024, output_len=128, batch=1))
    assert plan.fits is False
    assert plan.suggestion is not None
    assert "GPUs (--tp 2)" in plan.suggestion
    assert "--weight-dtype fp8" in plan.suggestion
    with pytest.raises(FlopwiseError, match="fits on"):
        plan_inference(spec, hw, InferJob(input_len=1024, output_len=128, batch=None))


def test_lengths_beyond_context_are_refused_with_the_limit() -> None:
    spec = load_model("llama-2-7b")
    hw = hardware_from_catalog("h100-sxm")
    with pytest.raises(FlopwiseError, match="context of 4096 tokens"):
        plan_inference(spec, hw, InferJob(input_len=4000, output_len=200, batch=1))


def test_split_k_never_lowers_the_shared_shape_efficiency() -> None:
    hw = hardware_from_catalog("h100-sxm")
    for m, n, k in ((1, 2560, 8192), (32, 1024, 8192), (4096, 8192, 8192), (128, 256, 512)):
        assert shape_efficiency(m, n, k, hw) >= gemm_shape_efficiency(m, n, hw)
        assert shape_efficiency(m, n, k, hw) <= 1.0


def test_rates_are_achievable_not_peak() -> None:
    hw = hardware_from_catalog("h100-sxm")
    r = make_rates(hw, get_engine("generic"), "bf16", "bf16")
    assert r.gemm_flops_s < hw.peak("bf16") * 1e12 * 0.85
    assert r.bw_bytes_s < hw.memory_bw_gbps * GB
    assert r.kv_bw_bytes_s <= r.bw_bytes_s


def test_moe_decode_reads_touched_experts_prefill_reads_all() -> None:
    spec = load_model("mixtral-8x7b")
    hw = hardware_from_catalog("h100-sxm")
    one = plan_inference(spec, hw, InferJob(input_len=512, output_len=64, batch=1, tp=2))
    many = plan_inference(spec, hw, InferJob(input_len=512, output_len=64, batch=64, tp=2))
    c = count_params(spec)
    # batch 1 reads 2 of 8 experts: far less than all weights
    assert one.decode.breakdown.weight_bytes < 0.45 * c.total * 2 / 2
    assert many.decode.breakdown.weight_bytes > 0.95 * c.total * 2 / 2
    assert one.prefill.breakdown.weight_bytes > 0.95 * c.total * 2 / 2


def test_pipeline_parallel_splits_weights_not_latency() -> None:
    spec = load_model("llama-3.1-70b")
    hw = hardware_from_catalog("h100-sxm")
    job = InferJob(input_len=1024, output_len=64, batch=1, tp=4)
    flat = plan_inference(spec, hw, job)
    from dataclasses import replace

    piped = plan_inference(spec, hw, replace(job, tp=2, pp=2))
    # same GPUs: weights per GPU about the same, a batch-1 token still crosses every layer
    assert piped.memory.weights_bytes == pytest.approx(flat.memory.weights_bytes, rel=0.05)
    assert piped.tpot_s > flat.tpot_s  # half the TP: each GPU reads twice the layer bytes
    # with a batch the pipeline fills: micro-batches overlap across stages
    busy = plan_inference(spec, hw, replace(job, tp=2, pp=2, batch=64))
    assert busy.output_tokens_per_s > 10 * piped.output_tokens_per_s


def test_engine_classes_differ_only_through_named_constants() -> None:
    from flopwise.plan.infer.constants import ENGINES

    spec = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm")
    tpot = {
        name: plan_inference(spec, hw, InferJob(input_len=512, output_len=64, engine=name)).tpot_s
        for name in ENGINES
    }
    assert tpot["tensorrt-llm"] < tpot["vllm"]
    for profile in ENGINES.values():
        assert profile.source
        assert 0 < profile.decode_attention_bw_fraction <= 1
        assert 0 < profile.memory_fraction < 1


def test_layout_from_gpus() -> None:
    from flopwise.plan.infer import resolve_layout

    hw = hardware_from_catalog("h100-sxm")
    assert resolve_layout(hw, None, None, None) == (1, 1, 1)
    assert resolve_layout(hw, 8, None, None) == (8, 1, 1)
    assert resolve_layout(hw, 16, None, None) == (8, 1, 2)
    assert resolve_layout(hw, 16, 4, 2) == (4, 2, 2)
    with pytest.raises(FlopwiseError, match="not a multiple"):
        resolve_layout(hw, 6, 4, None)
