"""TensorRT-LLM's engine sizing (trtllm-bench build) and the memory budget before its KV cache.

Expected values are derived by hand from the model's architecture (Llama 3.1 70B: hidden 8192,
80 layers, 64 heads / 8 KV heads of 128, FFN 28672, vocab 128256) and the rules the sources
state (tensorrt_llm/bench/build/tuning.py; KV = 0.9 of the memory free after weights,
activations and runtime buffers), never from the code's own output.
"""

from __future__ import annotations

import math

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import (
    ACTIVATION_HIDDEN_BUFFERS,
    RUNTIME_RESERVED_BYTES,
    TRTLLM_SLOT_BYTES_PER_SEQ_TOKEN,
    TRTLLM_SLOT_BYTES_PER_VOCAB,
    get_engine,
)
from flopwise.plan.infer.trtllm_build import bench_build, built_engine
from flopwise.units import GIB
from flopwise.workload import load_model

HIDDEN, LAYERS, FFN, VOCAB = 8192, 80, 28672, 128_256
KV_HEADS, HEAD_DIM, HEADS = 8, 128, 64
# one decoder layer: q,o (8192x8192) + k,v (8192x1024) + gate/up/down (3 x 8192x28672) + 2 norms
LAYER_PARAMS = (
    2 * HIDDEN * HIDDEN + 2 * HIDDEN * KV_HEADS * HEAD_DIM + 3 * HIDDEN * FFN + 2 * HIDDEN
)
DECODER_PARAMS = LAYERS * LAYER_PARAMS + HIDDEN  # + final norm
VOCAB_PARAMS = 2 * VOCAB * HIDDEN  # embedding + lm_head (untied)
TOTAL_PARAMS = DECODER_PARAMS + VOCAB_PARAMS  # 70,553,706,496


def test_param_count_used_below_matches_the_architecture() -> None:
    from flopwise.workload import count_params

    assert count_params(load_model("llama-3.1-70b")).total == TOTAL_PARAMS


def test_trtllm_bench_sizes_a_tight_70b_fp8_engine_at_its_floors() -> None:
    # H100 80 GB: 0.95 x (79.65 GiB - 70.55 "GB" of fp8 weights) / (160 KiB x 2000 tokens)
    device = 79.65 * GIB
    kv_token_gib = 2 * LAYERS * KV_HEADS * HEAD_DIM * 1 / GIB
    requests = 0.95 * (79.65 - TOTAL_PARAMS / 1e9) / (kv_token_gib * 2000)
    assert requests == pytest.approx(28.3, abs=0.1)
    build = bench_build(
        load_model("llama-3.1-70b"), TOTAL_PARAMS, 1, 1, 1.0, 1.0, device, 1000, 1000
    )
    assert build.kv_requests_estimate == pytest.approx(requests)
    # 28 requests < 256: max(64, 32 x ceil(28/32)) = 64; 28 x (1 + 1) = 57 tokens -> floor 2048
    assert (build.max_batch_size, build.max_num_tokens) == (64, 2048)


def test_trtllm_bench_caps_a_roomy_engine_at_4096_sequences() -> None:
    # Llama 3.1 8B fp8 on H200 at 128/128: hundreds of thousands of requests fit; the batch is
    # capped at 4096 and tokens = 4096 x (1 + 128/128) = 8192 -> 1024 x ceil(8) = 8192
    spec = load_model("llama-3.1-8b")
    from flopwise.workload import count_params

    hw = hardware_from_catalog("h200-sxm")
    assert hw.memory_bytes is not None
    build = bench_build(spec, count_params(spec).total, 1, 1, 1.0, 1.0, hw.memory_bytes, 128, 128)
    assert build.kv_requests_estimate > 4096
    assert (build.max_batch_size, build.max_num_tokens) == (4096, 8192)


def test_trtllm_bench_rounding_between_the_floors() -> None:
    # 70B fp8 at TP 8 on H100, 500/2000: requests = 0.95 x (8 x 79.65 - 70.55) / (2 x 80 x
    # max(8, 8) x 128 B / GiB x 2500) = 1413 -> batch 256 x ceil(1413/256) = 1536;
    # tokens 1413 x (1 + 500/2000) = 1766 -> max(2048, 256 x ceil(1766/256)) = 2048
    kv_token_gib = 2 * LAYERS * 8 * HEAD_DIM / GIB
    requests = 0.95 * (8 * 79.65 - TOTAL_PARAMS / 1e9) / (kv_token_gib * 2500)
    build = bench_build(
        load_model("llama-3.1-70b"), TOTAL_PARAMS, 8, 1, 1.0, 1.0, 79.65 * GIB, 500, 2000
    )
    assert build.kv_requests_estimate == pytest.approx(requests)
    assert build.max_batch_size == 256 * math.ceil(requests / 256)
    assert build.max_num_tokens == 2048


def test_trtllm_bench_counts_nvfp4_weights_at_half_a_byte() -> None:
    # tuning.py BYTES_PER_ELEM: NVFP4 0.5. Llama 3.1 70B FP4 with FP8 KV on one B200-sized
    # device (180 GiB), 128/2048: 0.95 x (180 - 70.55 x 0.5) / (160 KiB x 2176) = 414 requests
    # -> batch 128 x ceil(414/128) = 512. Counted at 2 bytes (16-bit) only 111 would fit.
    from flopwise.plan.infer.trtllm_build import bench_bytes_per_elem

    assert (bench_bytes_per_elem("fp4"), bench_bytes_per_elem("fp8")) == (0.5, 1.0)
    assert bench_bytes_per_elem("bf16") == bench_bytes_per_elem("int4") == 2.0
    spec = load_model("llama-3.1-70b")
    kv_token_gib = 2 * LAYERS * KV_HEADS * HEAD_DIM * 1 / GIB
    requests = 0.95 * (180 - TOTAL_PARAMS / 1e9 * 0.5) / (kv_token_gib * 2176)
    assert requests == pytest.approx(414, abs=1)
    _, build = built_engine(
        get_engine("tensorrt-llm"), spec, TOTAL_PARAMS, 1, 1, "fp4", "fp8", 180 * GIB, 128, 2048
    )
    assert build is not None
    assert build.kv_requests_estimate == pytest.approx(requests)
    assert build.max_batch_size == 128 * math.ceil(requests / 128)


def test_other_engines_are_not_resized() -> None:
    spec = load_model("llama-3.1-70b")
    vllm = get_engine("vllm")
    same, build = built_engine(vllm, spec, TOTAL_PARAMS, 1, 1, "fp8", "fp8", 80 * GIB, 1000, 1000)
    assert same is vllm and build is None


def test_trtllm_kv_budget_is_ninety_percent_of_what_weights_and_buffers_leave() -> None:
    spec = load_model("llama-3.1-70b")
    hw = hardware_from_catalog("h100-sxm")
    assert hw.memory_bytes is not None
    job = InferJob(
        input_len=1000, output_len=1000, batch=None, tp=1, weight_dtype="fp8", kv_dtype="fp8",
        engine="tensorrt-llm",
    )  # fmt: skip
    plan = plan_inference(spec, hw, job)
    # weights: decoder layers in fp8, embedding and lm_head kept 16-bit
    weights = DECODER_PARAMS * 1 + VOCAB_PARAMS * 2
    assert plan.memory.weights_bytes == pytest.approx(weights)
    # activations of the engine's 2048-token pass: 4 hidden-wide buffers + qkv (8192 + 2 x
    # 1024) + attention out 8192 + gate/up 2 x 28672 + down 28672, 16-bit
    act_per_token = ACTIVATION_HIDDEN_BUFFERS * HIDDEN + 10240 + HIDDEN + 2 * FFN + FFN
    activations = 2048 * act_per_token * 2
    # per-slot runtime + decoder buffers of the engine's 64 slots: vocab-wide, and four int32
    # tensors as long as its 2000-token max sequence length
    slots = 64 * (VOCAB * TRTLLM_SLOT_BYTES_PER_VOCAB + 2000 * TRTLLM_SLOT_BYTES_PER_SEQ_TOKEN)
    assert plan.memory.slot_buffers_bytes == pytest.approx(slots)
    fixed = weights + RUNTIME_RESERVED_BYTES + activations + slots
    kv_budget = 0.9 * (hw.memory_bytes - fixed)
    # GUARANTEED_NO_EVICT: 2000 tokens reserved in 64-token blocks = 2048 tokens of fp8 KV,
    # 2 x 80 layers x 8 heads x 128 bytes = 160 KiB per token
    per_seq = 2048 * 2 * LAYERS * KV_HEADS * HEAD_DIM
    assert plan.memory.kv_per_seq_bytes == per_seq
    assert plan.batch == math.floor(kv_budget / per_seq)
    assert plan.memory.fits is True
    assert plan.extras["engine_max_batch_size"] == 64


def test_running_requests_fit_the_engines_token_budget() -> None:
    # 8B fp8 on H200 at 2048/128: each step carries B decode tokens + B x 16 prompt tokens,
    # so B <= max_num_tokens / 17 ("Max Runtime Tokens" of the trtllm-bench report)
    spec = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h200-sxm")
    job = InferJob(
        input_len=2048, output_len=128, batch=None, tp=1, weight_dtype="fp8", kv_dtype="fp8",
        engine="tensorrt-llm",
    )  # fmt: skip
    plan = plan_inference(spec, hw, job)
    tokens = plan.extras["engine_max_num_tokens"]
    assert plan.batch <= tokens // 17
    assert plan.batch <= plan.extras["engine_max_batch_size"]
