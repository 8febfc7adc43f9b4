"""Expert parallelism and attention data parallelism for MoE serving (--ep, --attention-dp)."""

from __future__ import annotations

import pytest

from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
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
