"""TensorRT-LLM's PyTorch backend runs every pass that carries prompt tokens from Python, op by
op (its piecewise CUDA graphs, off by default, exist "to reduce context-phase launch overhead"),
while decode-only passes replay CUDA graphs. Such a pass costs the host each op's dispatch: a
PyTorch ``Linear`` forward's CPU time, 13.48 us on an x86 DGX and 37.08 us on Grace
(TransformerEngine issue #2053), per op the backend's modules call."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import get_engine, host_s_per_op
from flopwise.plan.infer.dispatch import eager_dispatch_s, eager_ops_per_layer
from flopwise.plan.infer.job import Precision
from flopwise.plan.infer.phases import beyond_graphs
from flopwise.workload import load_model

W16 = Precision(weight="bf16", kv="bf16", act="bf16", mode="16-bit")
WA8 = Precision(weight="fp8", kv="fp8", act="fp8", mode="weight+activation")
W8 = Precision(weight="fp8", kv="fp8", act="bf16", mode="weight-only")


def test_a_dense_layer_counts_its_norms_projections_attention_and_mlp() -> None:
    llama = load_model("llama-3.1-8b")
    # two fused add+norms; QKV, attention, O; gate-up, SiLU-and-mul, down
    assert eager_ops_per_layer(llama, W16) == 2 + 3 + 3
    assert eager_ops_per_layer(llama, W8) == 2 + 3 + 3  # weights dequantized inside the GEMM
    # quantized activations: a quantize op before each of the four GEMMs (the guide's NVFP4
    # MLP graph: fp4_quantize, nvfp4_gemm, silu_and_mul, fp4_quantize, nvfp4_gemm)
    assert eager_ops_per_layer(llama, WA8) == 2 + 5 + 5


def test_an_moe_layer_counts_the_router_and_one_fused_moe_op() -> None:
    qwen = load_model("qwen3-30b-a3b")  # Q/K norm, 128 experts, no shared expert
    assert eager_ops_per_layer(qwen, WA8) == 2 + (5 + 1) + 2
    scout = load_model("llama-4-scout")  # a shared expert beside the routed ones
    assert scout.shared_experts
    assert eager_ops_per_layer(scout, WA8) == pytest.approx(2 + 5 + 2 + 5)


def test_an_mla_model_counts_its_low_rank_projections_and_dense_first_layers() -> None:
    ds = load_model("deepseek-v3")
    assert ds.q_lora_rank and ds.dense_layers
    # q_a, q_b, kv_a, kv_b, o (each quantized) + the q_a and kv_a norms + attention
    attn = 5 * 2 + 2 + 1
    dense, moe = 5, 2 + 5  # the shared expert is a dense MLP
    frac = ds.moe_layers / ds.layers
    assert eager_ops_per_layer(ds, WA8) == pytest.approx(2 + attn + (1 - frac) * dense + frac * moe)


def test_grace_dispatches_each_op_at_its_measured_cost() -> None:
    assert host_s_per_op("gb200") == pytest.approx(37.08e-6)
    assert host_s_per_op("b200") == pytest.approx(13.48e-6)
    qwen = load_model("qwen3-30b-a3b")
    grace = eager_dispatch_s(qwen, WA8, "gb200", 48)
    assert grace == pytest.approx(48 * 10 * 37.08e-6)  # 17.8 ms per eager pass
    assert grace / eager_dispatch_s(qwen, WA8, "b200", 48) == pytest.approx(37.08 / 13.48)


def _plan(engine: str, acc: str, batch: int = 1, input_len: int = 128):  # type: ignore[no-untyped-def]
    job = InferJob(
        input_len=input_len, output_len=128, batch=batch, weight_dtype="fp8", kv_dtype="fp8",
        engine=engine,
    )  # fmt: skip
    return plan_inference(load_model("qwen3-30b-a3b"), hardware_from_catalog(acc), job)


def test_a_short_prompt_waits_on_the_host_and_a_decode_step_does_not() -> None:
    pyt_engine, cpp_engine = get_engine("tensorrt-llm-pytorch"), get_engine("tensorrt-llm")
    pyt, cpp = _plan("tensorrt-llm-pytorch", "gb200"), _plan("tensorrt-llm", "gb200")
    floor = eager_dispatch_s(load_model("qwen3-30b-a3b"), WA8, "gb200", 48)
    # the two backends run the same kernels: the C++ runtime's pass less its fixed host time is
    # the GPU's; the Python one's host dispatches 480 ops for one 128-token prompt and walks one
    # request, beside the GPU under the overlap scheduler
    gpu = cpp.prefill.time_s - cpp_engine.prefill_overhead_s
    host = floor + pyt_engine.host_s_per_seq
    assert host > gpu  # so the prompt waits on the host
    assert pyt.prefill.time_s == pytest.approx(pyt_engine.prefill_overhead_s + host, rel=1e-9)
    # a decode-only step replays a graph: no dispatch term, only the fixed step times differ
    # (one request's host work hides under the GPU's step)
    assert pyt.decode.breakdown.overhead_s - cpp.decode.breakdown.overhead_s == pytest.approx(
        pyt_engine.step_overhead_s - cpp_engine.step_overhead_s, abs=1e-9
    )


def test_a_long_prompt_hides_the_dispatch_under_the_gpu() -> None:
    # 32 prompts of 8,192 tokens on an x86 host: seconds of GPU work, 6.5 ms of dispatch
    pyt = _plan("tensorrt-llm-pytorch", "b200", batch=32, input_len=8192)
    cpp = _plan("tensorrt-llm", "b200", batch=32, input_len=8192)
    extra = pyt.prefill.time_s - cpp.prefill.time_s
    assert extra == pytest.approx(
        get_engine("tensorrt-llm-pytorch").prefill_overhead_s
        - get_engine("tensorrt-llm").prefill_overhead_s,
        abs=1e-9,
    )


def test_plans_say_what_an_eager_pass_costs_on_their_host() -> None:
    out = run_cli(
        "plan", "infer", "qwen3-30b-a3b", "-a", "gb200", "--engine", "tensorrt-llm-pytorch",
        "--weight-dtype", "fp8", "--batch", "8", "--input-len", "128", "--output-len", "128",
        "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["engine"]["eager_python_dispatch"] is True
    assert data["engine"]["host_s_per_op"] == pytest.approx(37.08e-6)
    assert any("10.0 ops per layer" in a for a in data["assumptions"])
    cpp = run_cli(
        "plan", "infer", "qwen3-30b-a3b", "-a", "gb200", "--engine", "tensorrt-llm",
        "--weight-dtype", "fp8", "--batch", "8", "--json",
    )  # fmt: skip
    assert cpp.returncode == 0, cpp.stderr
    engine = json.loads(cpp.stdout)["engine"]
    assert engine["eager_python_dispatch"] is False and engine["host_s_per_op"] is None


def test_a_decode_batch_above_every_captured_graph_runs_eagerly() -> None:
    spec, hw = load_model("qwen3-30b-a3b"), hardware_from_catalog("gb200")
    floor = eager_dispatch_s(spec, WA8, "gb200", 48)

    def overhead(graphs: tuple[int, ...]) -> float:
        job = InferJob(
            input_len=128, output_len=128, batch=64, weight_dtype="fp8", kv_dtype="fp8",
            engine="tensorrt-llm-pytorch", cuda_graph_batch_sizes=graphs,
        )  # fmt: skip
        return plan_inference(spec, hw, job).decode.breakdown.overhead_s

    # 64 sequences replay the graph captured at 64; with graphs only up to 32 they run eagerly,
    # the host dispatching every layer's ops (more than the GPU's step of 64 tokens)
    assert beyond_graphs((1, 8, 32), 64) and not beyond_graphs((1, 8, 32, 64), 64)
    assert overhead((1, 8, 32)) - overhead((1, 8, 32, 64)) > 0.5 * floor


def test_no_decode_pass_is_eager_where_the_graphs_reach_the_engine_cap() -> None:
    # trtllm-bench's 1.0 list runs to 8,192; an engine capped at 1,390 sequences captures 1,390
    # in place of the larger sizes, so no pass it schedules runs without a graph
    sizes = (1, 2, 4, 1024, 2048, 4096, 8192)
    assert not beyond_graphs(sizes, 1390, cap=1390)
    assert not beyond_graphs(sizes, 1408, cap=1390)  # an interpolation anchor past the cap
    assert beyond_graphs((1, 2, 4, 1024), 1100, cap=1390)  # the engine runs 1,100: no graph
