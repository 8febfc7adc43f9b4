"""Prompt passes with and without CUDA graphs (``--[no-]prefill-cuda-graphs``).

An engine that runs a pass carrying prompt tokens from Python, without a graph, pays every op's
host dispatch; under its overlap scheduler the pass takes at least that host time. SGLang's
default (v0.5.10 on) graphs them except on ROCm, with DP attention, for MLA models above 2,048
tokens and for MLA models on Blackwell; releases before ran them eagerly. The one measurement of
SGLang's eager dispatch (sglang PR #12160: an eager one-token DeepSeek-V3 pass, 82.6 ms) sets
how many PyTorch calls its modules make per op the planner counts.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import (
    ENGINES,
    HOST_S_PER_OP_X86,
    SGLANG_CALLS_PER_COUNTED_OP,
    SGLANG_EAGER_PASS_S,
    get_engine,
)
from flopwise.plan.infer.context import make_context
from flopwise.plan.infer.dispatch import eager_dispatch_s, eager_ops_per_layer
from flopwise.plan.infer.prefill_graphs import (
    PROMPT_PASS_GRAPH_POLICIES,
    SGLANG_MLA_GRAPH_MAX_TOKENS,
    prompt_pass_graphed,
)
from flopwise.validate.online import _command, load_online_runs
from flopwise.workload import load_model

DSV3 = load_model("deepseek-v3")
H200 = hardware_from_catalog("h200-sxm")
JOB = InferJob(
    input_len=64,
    output_len=64,
    batch=1,
    tp=8,
    weight_dtype="fp8",
    kv_dtype="fp8",
    engine="sglang",
)


def _ctx(model=DSV3, hw=H200, **kw):  # type: ignore[no-untyped-def]
    return make_context(model, hw, replace(JOB, **kw))


def test_sglang_calls_per_op_is_the_measured_pass_over_the_counted_ops() -> None:
    # DeepSeek-V3 in FP8 (weights and activations, as SGLang serves its FP8 checkpoint): 82.6 ms
    # over 61 layers of counted ops at the x86 host's measured time per op
    ctx = _ctx()
    assert ctx.precision.mode == "weight+activation"
    ops = eager_ops_per_layer(DSV3, ctx.precision)
    derived = SGLANG_EAGER_PASS_S / (DSV3.layers * ops * HOST_S_PER_OP_X86)
    assert pytest.approx(derived, rel=5e-3) == SGLANG_CALLS_PER_COUNTED_OP
    # so an eager DeepSeek-V3 pass on an x86 host is the measured pass again
    one_pass = eager_dispatch_s(DSV3, ctx.precision, "h200-sxm", DSV3.layers, derived)
    assert one_pass == pytest.approx(SGLANG_EAGER_PASS_S, rel=1e-9)
    assert get_engine("sglang").calls_per_counted_op == SGLANG_CALLS_PER_COUNTED_OP
    assert get_engine("tensorrt-llm-pytorch").calls_per_counted_op == 1.0


def test_every_engine_names_a_known_policy() -> None:
    for engine in ENGINES.values():
        assert engine.prompt_pass_graphs in PROMPT_PASS_GRAPH_POLICIES, engine.name
    # only engines that dispatch from Python pay for an eager pass
    assert {e.name for e in ENGINES.values() if e.eager_python_dispatch} == {
        "sglang",
        "tensorrt-llm-pytorch",
    }


def test_sglang_default_follows_its_piecewise_graph_rules() -> None:
    llama = load_model("llama-3.1-8b")
    h100 = hardware_from_catalog("h100-sxm")
    # dense on an NVIDIA part: every pass up to the prefill chunk is captured
    assert prompt_pass_graphed(_ctx(llama, h100, tp=1), 8192)
    # MLA: up to 2,048 tokens
    assert prompt_pass_graphed(_ctx(), SGLANG_MLA_GRAPH_MAX_TOKENS)
    assert not prompt_pass_graphed(_ctx(), SGLANG_MLA_GRAPH_MAX_TOKENS + 1)
    # MLA on Blackwell (trtllm_mla), any model on ROCm, DP attention: eager
    assert not prompt_pass_graphed(_ctx(hw=hardware_from_catalog("b200")), 100)
    assert not prompt_pass_graphed(_ctx(llama, hardware_from_catalog("mi300x"), tp=1), 100)
    assert not prompt_pass_graphed(_ctx(attention_dp=True), 100)
    # the job's say wins either way
    assert prompt_pass_graphed(_ctx(prefill_cuda_graphs=True), 100_000)
    assert not prompt_pass_graphed(_ctx(llama, h100, tp=1, prefill_cuda_graphs=False), 100)
    # TensorRT-LLM's PyTorch backend: eager unless asked (piecewise graphs off by default)
    trt = _ctx(llama, h100, tp=1, engine="tensorrt-llm-pytorch")
    assert not prompt_pass_graphed(trt, 100)


def test_an_eager_short_prompt_takes_at_least_the_hosts_dispatch() -> None:
    eager = plan_inference(DSV3, H200, replace(JOB, prefill_cuda_graphs=False))
    graphed = plan_inference(DSV3, H200, replace(JOB, prefill_cuda_graphs=True))
    host_ms = SGLANG_EAGER_PASS_S * 1e3  # one pass over every layer on this x86 host
    # 64 prompt tokens on 8 GPUs: the GPU's pass is far shorter than the host's dispatch
    assert graphed.ttft_s * 1e3 < host_ms
    assert eager.ttft_s * 1e3 >= host_ms
    # the host's dispatch bounds the pass: the GPU's part hides under it, the engine's fixed
    # time per prefill pass stays beside it
    fixed_ms = get_engine("sglang").prefill_overhead_s * 1e3
    pre_e = eager.to_dict()["breakdown"]["prefill"]
    assert pre_e["total_ms"] == pytest.approx(fixed_ms + host_ms, rel=2e-3)
    # decode passes replay graphs in both
    assert eager.tpot_s == pytest.approx(graphed.tpot_s, rel=1e-9)
    # the default for this deployment (Hopper, MLA, 64 tokens) is the graphed pass
    default = plan_inference(DSV3, H200, JOB)
    assert default.ttft_s == pytest.approx(graphed.ttft_s, rel=1e-9)


def test_a_long_prompt_hides_the_dispatch_under_the_gpus_pass() -> None:
    long_job = replace(JOB, input_len=7000)
    eager = plan_inference(DSV3, H200, replace(long_job, prefill_cuda_graphs=False))
    graphed = plan_inference(DSV3, H200, replace(long_job, prefill_cuda_graphs=True))
    assert graphed.ttft_s * 1e3 > SGLANG_EAGER_PASS_S * 1e3
    assert eager.ttft_s == pytest.approx(graphed.ttft_s, rel=1e-9)


def test_trtllm_pytorch_piecewise_graphs_remove_the_context_dispatch() -> None:
    # GB200's Grace host dispatches slowly: a short context pass is host-bound
    gb200 = hardware_from_catalog("gb200")
    llama = load_model("llama-3.1-8b")
    job = InferJob(
        input_len=64, output_len=64, batch=1, weight_dtype="fp8", engine="tensorrt-llm-pytorch"
    )
    default = plan_inference(llama, gb200, job)
    graphed = plan_inference(llama, gb200, replace(job, prefill_cuda_graphs=True))
    assert graphed.ttft_s < default.ttft_s
    eager = plan_inference(llama, gb200, replace(job, prefill_cuda_graphs=False))
    assert eager.ttft_s == pytest.approx(default.ttft_s, rel=1e-9)


def test_a_bad_value_is_refused() -> None:
    with pytest.raises(FlopwiseError, match="prefill_cuda_graphs must be true, false or unset"):
        replace(JOB, prefill_cuda_graphs="yes")  # type: ignore[arg-type]


def test_cli_json_and_words() -> None:
    proc = run_cli(
        "plan", "infer", "deepseek-v3", "-a", "h200-sxm", "--tp", "8", "--engine", "sglang",
        "--weight-dtype", "fp8", "--input-len", "64", "--output-len", "64",
        "--no-prefill-cuda-graphs", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["job"]["prefill_cuda_graphs"] is False
    assert out["engine"]["calls_per_counted_op"] == SGLANG_CALLS_PER_COUNTED_OP
    words = " ".join(out["assumptions"])
    assert "passes with prompt tokens run eagerly (as asked)" in words
    assert "PR #12160" in words
    # an engine that prices no pass op by op says the flag changes nothing
    proc = run_cli(
        "plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--engine", "vllm",
        "--prefill-cuda-graphs", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "--prefill-cuda-graphs changes nothing on vllm" in " ".join(
        json.loads(proc.stdout)["assumptions"]
    )


def test_the_inferencex_sglang_rows_are_posed_eager() -> None:
    rows = [r for r in load_online_runs() if r["engine"] == "sglang"]
    assert rows
    for r in rows:
        assert r["prefill_cuda_graphs"] == "no", r["id"]
        assert "--no-prefill-cuda-graphs" in _command(r)


def test_compare_prices_every_offer_as_the_job_says() -> None:
    from flopwise.compare.jobs import CompareInferJob
    from flopwise.compare.planners import infer_estimate

    base = CompareInferJob(
        input_len=64, output_len=64, weight_dtype="fp8", kv_dtype="fp8", engine="sglang"
    )
    assert base.to_dict()["prefill_cuda_graphs"] is None
    eager = replace(base, prefill_cuda_graphs=False)
    assert eager.to_dict()["prefill_cuda_graphs"] is False
    # an 8 x H200 offer of DeepSeek-V3: the eager pass's host time reaches the first token
    slow = infer_estimate(DSV3, H200, 8, eager)
    fast = infer_estimate(DSV3, H200, 8, replace(base, prefill_cuda_graphs=True))
    assert slow["ttft_ms"] > fast["ttft_ms"]
