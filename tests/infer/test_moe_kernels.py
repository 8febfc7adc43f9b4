"""The kernels around an MoE layer's expert GEMMs, as each engine runs them (moe_kernels.py).

Golden numbers are the kernel list and tensor sizes read from TensorRT-LLM's source:
tensorrt_llm/layers/moe.py (fp32 cast + fp32 RowLinear router, fp8 quantize of the input) and
cpp/tensorrt_llm/kernels/mixtureOfExperts/moe_kernels.cu CutlassMoeFCRunner::runMoe
(topkGatingSoftmax, CUB radix sort, computeTotalRowsBeforeExpert, expandInputRowsKernel,
computeStridesHopperKernel x2 on Hopper, finalizeMoeRoutingKernel from 16-bit GEMM outputs).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import get_engine
from flopwise.plan.infer.moe_kernels import routing_cost
from flopwise.workload import load_model

T, H, K = 1000.0, 4096, 2  # tokens, Mixtral's hidden size, top-2
BW = 3.0e12


def _cost(recipe: str, acc: str, act_bytes: float, rows: float = K * T):  # type: ignore[no-untyped-def]
    hw = hardware_from_catalog(acc)
    return routing_cost(recipe, T, rows, H, 8, act_bytes, hw, BW)


def test_trtllm_fp8_on_hopper_launches_twelve_kernels_around_the_expert_gemms() -> None:
    # cast, fp32 router GEMM, fp8 quantize, gating, 3 radix-sort kernels, rows-before-expert,
    # expand, 2 Hopper stride set-ups, finalize
    assert _cost("tensorrt-llm", "h100-sxm", 1.0).launches == 12
    # A100 fp16: no quantize, no Hopper stride kernels
    assert _cost("tensorrt-llm", "a100-sxm-80gb", 2.0).launches == 9
    assert _cost("generic", "h100-sxm", 1.0).launches == 3


def test_trtllm_routing_bytes_follow_the_plugin_tensors() -> None:
    # per token x hidden: cast 2+4, fp32 router read 4, fp8 quantize 2+1,
    # expand 2 x k x 1 (fp8 rows), finalize k x 2 (16-bit GEMM outputs) + 2 = 23 for top-2
    fp8 = _cost("tensorrt-llm", "h100-sxm", 1.0)
    assert fp8.bytes_moved == pytest.approx(23 * T * H)
    # fp16: cast 6, router 4, expand 2 x 2 x 2 = 8, finalize 6 = 24
    fp16 = _cost("tensorrt-llm", "a100-sxm-80gb", 2.0)
    assert fp16.bytes_moved == pytest.approx(24 * T * H)
    # the generic recipe: permute (read + write one row per (token, expert)) and reduce, 16-bit
    assert _cost("generic", "h100-sxm", 1.0).bytes_moved == pytest.approx(12 * T * H)
    assert fp8.memory_s == pytest.approx(fp8.bytes_moved / BW)


def test_expert_parallel_ranks_expand_and_reduce_only_their_rows() -> None:
    whole = _cost("tensorrt-llm", "h100-sxm", 1.0)
    ep8 = _cost("tensorrt-llm", "h100-sxm", 1.0, rows=K * T / 8)
    # expand (2 x rows x 1) and the finalize read (rows x 2) shrink 8x; the rest is per token
    assert whole.bytes_moved - ep8.bytes_moved == pytest.approx(4 * K * T * H * 7 / 8)


def test_unknown_recipe_is_refused() -> None:
    with pytest.raises(FlopwiseError, match="MoE kernel recipe"):
        _cost("deepspeed", "h100-sxm", 1.0)


def test_engines_name_their_recipe() -> None:
    assert get_engine("tensorrt-llm").moe_kernels == "tensorrt-llm"
    for name in ("vllm", "sglang", "generic"):
        assert get_engine(name).moe_kernels == "generic"


def _decode_ms(model: str, tp: int, recipe: str | None = None) -> float:
    job = InferJob(
        input_len=128, output_len=128, batch=2048, tp=tp, weight_dtype="fp8", kv_dtype="fp8",
        engine="tensorrt-llm",
    )  # fmt: skip
    engine = get_engine("tensorrt-llm")
    if recipe is not None:
        engine = replace(engine, moe_kernels=recipe)
    plan = plan_inference(load_model(model), hardware_from_catalog("h200-sxm"), job, engine=engine)
    return plan.decode.time_s * 1e3


def test_the_routing_chain_weighs_more_as_tensor_parallelism_shrinks_the_experts() -> None:
    # the routing chain runs on every rank with all tokens; the expert GEMMs split over TP
    extra = {
        tp: _decode_ms("mixtral-8x7b", tp) / _decode_ms("mixtral-8x7b", tp, "generic")
        for tp in (1, 8)
    }
    assert extra[1] > 1.0
    assert extra[8] > extra[1]


def test_dense_models_do_not_change_with_the_moe_recipe() -> None:
    assert _decode_ms("llama-3.1-8b", 1) == pytest.approx(_decode_ms("llama-3.1-8b", 1, "generic"))


def _prefill_ms(model: str) -> float:
    job = InferJob(
        input_len=4096, output_len=16, batch=8, tp=1, weight_dtype="fp8", kv_dtype="fp8",
        engine="tensorrt-llm",
    )  # fmt: skip
    plan = plan_inference(load_model(model), hardware_from_catalog("h200-sxm"), job)
    return plan.prefill.time_s * 1e3


def test_expert_gemms_run_as_one_grouped_kernel_below_the_dense_roof(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a compute-bound MoE prefill slows by the grouped kernel's share of the dense FLOP roof
    # (GROUPED_GEMM_EFFICIENCY, fitted on DeepGEMM's grouped GEMMs); a dense model does not
    from flopwise.plan import gemm
    from flopwise.plan.gemm_constants import GROUPED_GEMM_EFFICIENCY

    grouped = {m: _prefill_ms(m) for m in ("mixtral-8x7b", "llama-3.1-8b")}
    monkeypatch.setattr(gemm, "GROUPED_GEMM_EFFICIENCY", 1.0)  # serving reads it per call
    dense_roof = {m: _prefill_ms(m) for m in ("mixtral-8x7b", "llama-3.1-8b")}
    assert grouped["llama-3.1-8b"] == pytest.approx(dense_roof["llama-3.1-8b"])
    slower = grouped["mixtral-8x7b"] / dense_roof["mixtral-8x7b"]
    # the experts are most of Mixtral's prefill FLOPs, not all of its time
    assert 1.0 < slower < 1.0 / GROUPED_GEMM_EFFICIENCY
    assert slower > 1.0 + 0.5 * (1.0 / GROUPED_GEMM_EFFICIENCY - 1.0)
