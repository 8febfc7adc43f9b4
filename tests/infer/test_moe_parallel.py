"""Expert parallelism and attention data parallelism for MoE serving (--ep, --attention-dp)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, InferPlan, plan_inference
from flopwise.plan.infer.constants import get_engine
from flopwise.workload import load_model
from flopwise.workload.memory_bytes import kv_bytes_per_token_per_layer
from flopwise.workload.params import count_params

GIB = 2**30


def _plan(model: str, **kw: object) -> object:
    job = InferJob(
        input_len=1000, output_len=1000, batch=64, tp=8, weight_dtype="fp8", kv_dtype="fp8",
        **kw,  # type: ignore[arg-type]
    )  # fmt: skip
    return plan_inference(load_model(model), hardware_from_catalog("h200-sxm"), job)


def test_expert_parallelism_keeps_the_weight_bytes_per_gpu() -> None:
    # experts/ep whole experts, each over tp/ep ranks: E * expert / tp bytes either way
    tp_only, ep = _plan("mixtral-8x7b"), _plan("mixtral-8x7b", ep=8)
    assert ep.memory.weights_bytes == pytest.approx(tp_only.memory.weights_bytes)  # type: ignore[attr-defined]


def test_attention_dp_replicates_attention_weights_and_splits_mla_cache() -> None:
    spec = load_model("deepseek-v3")
    base, dp = _plan("deepseek-v3"), _plan("deepseek-v3", attention_dp=True)
    attn = count_params(spec).attention  # fp8: one byte per weight
    extra = dp.memory.weights_bytes - base.memory.weights_bytes  # type: ignore[attr-defined]
    assert extra == pytest.approx(attn * 7 / 8, rel=0.01)
    # MLA's latent is whole on every rank under TP; under DP a rank holds 1/8 of the sequences
    latent = kv_bytes_per_token_per_layer(spec, "fp8") * spec.layers * 2000 * 64
    assert base.memory.kv_bytes == pytest.approx(latent, rel=0.01)  # type: ignore[attr-defined]
    assert dp.memory.kv_bytes == pytest.approx(latent / 8, rel=0.01)  # type: ignore[attr-defined]


def test_layouts_that_cannot_be_split_are_refused() -> None:
    with pytest.raises(FlopwiseError, match="must divide --tp"):
        InferJob(tp=4, ep=3)
    with pytest.raises(FlopwiseError, match="dense"):
        plan_inference(
            load_model("llama-3.1-8b"), hardware_from_catalog("h100-sxm"), InferJob(tp=2, ep=2)
        )


def _trtllm(model: str, whole: bool) -> InferPlan:
    """A TensorRT-LLM plan under attention DP on 8 x H200, with its dense part whole or
    (counterfactually) split over the TP group, all else equal."""
    engine = replace(get_engine("tensorrt-llm"), attention_dp_whole_dense=whole)
    job = InferJob(
        input_len=1000, output_len=1000, batch=64, tp=8, ep=8, attention_dp=True,
        weight_dtype="fp8", kv_dtype="fp8", engine="tensorrt-llm",
    )  # fmt: skip
    return plan_inference(load_model(model), hardware_from_catalog("h200-sxm"), job, engine=engine)


@pytest.fixture(scope="module")
def maverick() -> tuple[InferPlan, InferPlan]:
    """Llama 4 Maverick planned (whole, split): each plan made once for the tests below."""
    return _trtllm("llama-4-maverick", True), _trtllm("llama-4-maverick", False)


def test_tensorrt_llm_attention_dp_keeps_the_dense_part_whole_on_every_rank(
    maverick: tuple[InferPlan, InferPlan],
) -> None:
    # TensorRT-LLM's PyTorch backend builds Llama 4's dense MLP layers and shared expert with
    # overridden_tp_size=1 under attention DP, and its embedding and lm_head without a mapping
    assert get_engine("tensorrt-llm").attention_dp_whole_dense
    assert get_engine("vllm").attention_dp_whole_dense  # DP ranks with shared experts
    assert not get_engine("sglang").attention_dp_whole_dense
    spec = load_model("llama-4-maverick")
    c = count_params(spec)
    whole, split = maverick
    extra = whole.memory.weights_bytes - split.memory.weights_bytes
    dense = (c.mlp + c.shared_experts + c.router + c.norms) * 1.0  # fp8 weights
    vocab = (c.embedding + c.lm_head) * 2.0  # the vocabulary layers stay 16-bit
    assert dense > 8e9  # 24 dense layers of 16,384 and a shared expert in each MoE layer
    assert extra == pytest.approx((dense + vocab) * 7 / 8, rel=1e-6)
    # the bigger weights leave less room for KV: fewer sequences fit
    assert whole.memory.max_batch is not None and split.memory.max_batch is not None
    assert whole.memory.max_batch < split.memory.max_batch


def test_whole_dense_layers_need_no_collective_and_no_logits_gather(
    maverick: tuple[InferPlan, InferPlan],
) -> None:
    w, s = (plan.decode.breakdown for plan in maverick)
    # only the 24 MoE layers of 48 gather tokens, and whole logits rows need no all-gather
    assert w.comm_s < 0.6 * s.comm_s
    # each rank reads the whole dense MLP and shared expert instead of an eighth of them
    assert w.weight_bytes > s.weight_bytes
    # a model without dense layers or shared experts (Qwen3-30B-A3B) differs by the logits
    # gather alone
    qw, qs = (_trtllm("qwen3-30b-a3b", whole).decode.breakdown for whole in (True, False))
    assert qw.comm_s < qs.comm_s


def test_the_plan_says_what_is_whole_under_attention_dp(
    maverick: tuple[InferPlan, InferPlan],
) -> None:
    whole, split = maverick
    notes = " ".join(whole.assumptions)
    assert "whole on every rank" in notes and "no logits all-gather" in notes
    assert "no logits all-gather" not in " ".join(split.assumptions)


def test_the_busiest_expert_parallel_rank_sets_a_small_batchs_step() -> None:
    """One token's top-8 of 256 experts over 8 ranks of 32: each rank holds one of them on
    average, but the step waits for the rank holding the most, about 2.5 (routing simulated
    below); at a large batch every expert is touched and the ranks are even."""
    import random

    from flopwise.plan.infer.shard import busiest_group_experts, expected_distinct_experts

    rng = random.Random(11)
    trials = 20_000
    total = 0
    for _ in range(trials):
        counts = [0] * 8
        for e in rng.sample(range(256), 8):
            counts[e // 32] += 1
        total += max(counts)
    simulated = total / trials
    assert busiest_group_experts(256, 8, 1, 8) == pytest.approx(simulated, rel=0.05)
    assert busiest_group_experts(256, 8, 1, 8) > 2.0 * expected_distinct_experts(256, 8, 1) / 8
    assert busiest_group_experts(256, 8, 4096, 8) == pytest.approx(32.0)
    assert busiest_group_experts(256, 8, 3, 1) == expected_distinct_experts(256, 8, 3)


def test_expert_parallel_decode_at_batch_one_reads_the_busiest_ranks_experts() -> None:
    # Qwen3-235B-A22B on 8 x H200 at batch 1: under TP each rank reads an eighth of the 8
    # touched experts; under EP 8 the busiest rank reads its touched experts whole
    def decode(ep: int) -> object:
        job = InferJob(
            input_len=1000, output_len=100, batch=1, tp=8, ep=ep, weight_dtype="fp8",
            kv_dtype="fp8",
        )  # fmt: skip
        plan = plan_inference(load_model("qwen3-235b-a22b"), hardware_from_catalog("h200-sxm"), job)
        return plan.decode

    tp, ep = decode(1), decode(8)
    assert ep.breakdown.weight_bytes > 1.5 * tp.breakdown.weight_bytes  # type: ignore[attr-defined]
    assert ep.time_s > tp.time_s  # type: ignore[attr-defined]
