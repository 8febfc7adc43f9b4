"""Decode passes padded to captured CUDA-graph batch sizes (`--cuda-graph-batch-sizes`,
TensorRT-LLM's ``cuda_graph_config: {enable_padding: true, batch_sizes: [...]}``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.context import make_context
from flopwise.plan.infer.phases import decode_phase, graph_batch_cap, padded_rows
from flopwise.validate.inference_rows import posed_rows
from flopwise.validate.trtllm_presets import CUDA_GRAPH_BATCH_SIZES
from flopwise.workload.hf import load_model

SIZES = CUDA_GRAPH_BATCH_SIZES["trtllm10"]


def test_the_one_dot_zero_document_s_sizes() -> None:
    assert SIZES == (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192)


def test_a_batch_runs_the_smallest_captured_size_at_least_as_large() -> None:
    assert padded_rows(SIZES, 1390) == pytest.approx(2048 / 1390)
    assert padded_rows(SIZES, 300) == pytest.approx(384 / 300)
    assert padded_rows(SIZES, 3.5) == pytest.approx(4 / 3.5)
    for captured in (1, 64, 384, 8192):
        assert padded_rows(SIZES, captured) == 1.0
    assert padded_rows(SIZES, 9000) == 1.0  # above every captured size: run as it is
    assert padded_rows((), 1390) == 1.0  # no graphs: no padding


def test_sizes_above_the_engine_s_slots_are_replaced_by_its_cap() -> None:
    """TensorRT-LLM captures min(max_batch_size, max_num_tokens) in place of larger sizes."""
    assert graph_batch_cap(1536, 8192) == 1536 and graph_batch_cap(None, 8192) == 8192
    assert graph_batch_cap(4096, 2048) == 2048
    assert padded_rows(SIZES, 1390, cap=1536) == pytest.approx(1536 / 1390)
    assert padded_rows(SIZES, 1000, cap=1536) == pytest.approx(1024 / 1000)
    assert padded_rows(SIZES, 1390, cap=4096) == pytest.approx(2048 / 1390)


def _ctx(sizes: tuple[int, ...]):  # type: ignore[no-untyped-def]
    job = InferJob(
        input_len=1000, output_len=1000, batch=1390, tp=1, weight_dtype="fp8", kv_dtype="fp8",
        engine="tensorrt-llm-pytorch", cuda_graph_batch_sizes=sizes,
    )  # fmt: skip
    return make_context(load_model("llama-3.1-8b"), hardware_from_catalog("h200-sxm"), job)


def test_only_decode_only_passes_are_padded() -> None:
    padded, plain = _ctx(SIZES), _ctx(())
    pad_step = decode_phase(padded, 1390).breakdown
    plain_step = decode_phase(plain, 1390).breakdown
    # the GEMMs run 2,048 rows instead of 1,390: more compute, the same KV reads
    assert pad_step.compute_s > 1.2 * plain_step.compute_s
    assert pad_step.kv_s == pytest.approx(plain_step.kv_s)
    # a pass with prompt tokens runs eagerly: not padded
    mixed = decode_phase(padded, 1390, prefill_per_step=500).time_s
    assert mixed == pytest.approx(decode_phase(plain, 1390, prefill_per_step=500).time_s)
    # a batch of a captured size is not padded
    assert decode_phase(padded, 1024).time_s == pytest.approx(decode_phase(plain, 1024).time_s)


def test_the_plan_says_it_pads_and_slows_an_odd_batch() -> None:
    spec, hw = load_model("llama-3.1-8b"), hardware_from_catalog("h200-sxm")
    job = InferJob(
        input_len=1000, output_len=1000, batch=1390, tp=1, weight_dtype="fp8", kv_dtype="fp8",
        engine="tensorrt-llm-pytorch",
    )  # fmt: skip
    padded = plan_inference(spec, hw, replace(job, cuda_graph_batch_sizes=SIZES))
    plain = plan_inference(spec, hw, job)
    assert padded.tpot_s > plain.tpot_s
    assert any("CUDA graphs captured at batch 1, 2, 4" in a for a in padded.assumptions)
    assert not any("CUDA graphs captured" in a for a in plain.assumptions)
    assert padded.to_dict()["job"]["cuda_graph_batch_sizes"] == list(SIZES)


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(FlopwiseError, match="increasing order"):
        InferJob(input_len=10, output_len=10, cuda_graph_batch_sizes=(4, 2))
    with pytest.raises(FlopwiseError, match="increasing order"):
        InferJob(input_len=10, output_len=10, cuda_graph_batch_sizes=(0, 2))
    r = run_cli(
        "plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--cuda-graph-batch-sizes", "8,x"
    )
    assert r.returncode == 2 and "give positive batch sizes" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_one_dot_zero_rows_are_posed_with_the_document_s_graphs() -> None:
    posed, _ = posed_rows()
    for row in posed:
        if row.family == "trtllm10":
            assert row.cuda_graph_batch_sizes == SIZES
            assert "--cuda-graph-batch-sizes 1,2,4,8,16,32,64,128,256,384,512,1024" in row.command
        else:
            assert row.cuda_graph_batch_sizes == ()
            assert "--cuda-graph-batch-sizes" not in row.command
