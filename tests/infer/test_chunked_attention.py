"""Llama 4's chunked attention in serving: vLLM decodes chunked layers within the chunk;
TensorRT-LLM 1.0 chunks context requests only, so its generation steps attend to every token
(EngineProfile.chunked_attention_in_decode); both keep every token's KV by default."""

from __future__ import annotations

from dataclasses import replace

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import get_engine
from flopwise.plan.infer.context import make_context
from flopwise.plan.infer.memory import kv_bytes_per_seq_per_gpu
from flopwise.plan.infer.phases import decode_phase
from flopwise.plan.infer.shard import make_shard, mean_decode_keys
from flopwise.workload import load_model

SCOUT = "llama-4-scout"  # 48 layers, 36 chunked in 8,192-token chunks


def test_engine_profiles_say_which_phase_is_chunked() -> None:
    assert get_engine("tensorrt-llm").chunked_attention_in_decode is False
    assert get_engine("vllm").chunked_attention_in_decode is True
    assert get_engine("tensorrt-llm").to_dict()["chunked_attention_in_decode"] is False


def test_kv_of_chunked_layers_is_kept_whole_and_windows_are_capped() -> None:
    scout = load_model(SCOUT)
    local = make_shard(scout, 4, 1, "fp8", "fp8")
    every = make_shard(scout, 4, 1, "fp8", "fp8", chunked_decode=False)
    assert local.decode_local and not every.decode_local
    per_layer = local.kv_per_token_layer_bytes
    # no engine frees a chunk's KV by default: every layer holds every token, whatever decodes
    for shard in (local, every):
        assert kv_bytes_per_seq_per_gpu(shard, 22000) == pytest.approx(per_layer * 48 * 22000)
    # a sliding window keeps only the window
    gpt_oss = load_model("gpt-oss-20b")  # 128-token window on half of its 24 layers
    sh = make_shard(gpt_oss, 1, 1, "bf16", "bf16", chunked_decode=False)
    assert sh.decode_local
    assert kv_bytes_per_seq_per_gpu(sh, 22000) == pytest.approx(
        sh.kv_per_token_layer_bytes * (12 * 22000 + 12 * 128)
    )


def test_trtllm_decode_reads_every_token_of_chunked_layers() -> None:
    scout = load_model(SCOUT)
    hw = hardware_from_catalog("h200-sxm")
    steps = {}
    for engine in ("tensorrt-llm", "vllm"):
        job = InferJob(
            input_len=20000,
            output_len=2000,
            batch=8,
            tp=4,
            weight_dtype="fp8",
            kv_dtype="fp8",
            engine=engine,
        )
        ctx = make_context(scout, hw, job)
        steps[engine] = decode_phase(ctx, 8).breakdown
    full, local = mean_decode_keys(scout, 20000, 2000)
    assert local < full / 2  # mean position within a chunk, against ~21,000 keys
    # the same eight sequences read (12 + 36) x full keys' KV under TensorRT-LLM and
    # 12 x full + 36 x local under vLLM; the KV term scales with it
    ratio = steps["tensorrt-llm"].kv_s / steps["vllm"].kv_s
    expected = 48 * full / (12 * full + 36 * local)
    decode_bw = {e: get_engine(e).decode_attention_bw_fraction for e in ("tensorrt-llm", "vllm")}
    assert ratio == pytest.approx(
        expected * decode_bw["vllm"] / decode_bw["tensorrt-llm"], rel=0.02
    )


def test_trtllm_decodes_long_llama4_requests_slower() -> None:
    scout = load_model(SCOUT)
    hw = hardware_from_catalog("h200-sxm")
    job = InferJob(
        input_len=20000,
        output_len=2000,
        batch=None,
        tp=4,
        weight_dtype="fp8",
        kv_dtype="fp8",
        engine="tensorrt-llm",
    )
    trt = plan_inference(scout, hw, job)
    as_if_chunked = replace(get_engine("tensorrt-llm"), chunked_attention_in_decode=True)
    chunked = plan_inference(scout, hw, job, engine=as_if_chunked)
    # the same memory (the KV is whole either way), slower steps
    assert trt.memory.max_batch == chunked.memory.max_batch
    assert trt.tpot_s > chunked.tpot_s
    assert trt.output_tokens_per_s < chunked.output_tokens_per_s
