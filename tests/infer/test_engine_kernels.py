"""Kernels the serving engines run around the GEMMs: MoE permute/finalize, the logits gather
and the sampler's read (memory-bound or collective, charged by the bytes they move)."""

from __future__ import annotations

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer.constants import get_engine
from flopwise.plan.infer.latency import make_rates
from flopwise.plan.infer.moe_kernels import routing_cost


def _moe_routing(tokens: float, rows: float, hidden: int, r) -> float:  # type: ignore[no-untyped-def]
    """Seconds of the generic recipe's memory-bound routing kernels (permute and reduce)."""
    return routing_cost(
        "generic", tokens, rows, hidden, 0, r.act_bytes, None, r.bw_bytes_s
    ).memory_s


def _rates():  # type: ignore[no-untyped-def]
    hw = hardware_from_catalog("h100-sxm", "hgx-h100")
    return make_rates(hw, get_engine("tensorrt-llm"), "bf16", "bf16")


def test_routing_moves_each_token_once_in_and_out_and_each_routed_row_twice() -> None:
    r = _rates()
    tokens, hidden = 1000.0, 4096
    top2 = _moe_routing(tokens, 2 * tokens, hidden, r)
    top8 = _moe_routing(tokens, 8 * tokens, hidden, r)
    # permute reads the token and writes its k rows; finalize reads the k rows and writes the
    # token: (1 + k) 16-bit hidden states each way
    assert top8 / top2 == pytest.approx((1 + 8) / (1 + 2))
    mixtral_step = 2 * (1 + 2) * tokens * hidden * 2.0 / r.bw_bytes_s
    assert top2 == pytest.approx(mixtral_step)


def test_expert_parallel_ranks_move_only_their_rows() -> None:
    r = _rates()
    whole = _moe_routing(1000.0, 2000.0, 4096, r)
    ep4 = _moe_routing(1000.0, 500.0, 4096, r)
    assert ep4 < whole
    assert ep4 / whole == pytest.approx((1000 + 500) / (1000 + 2000))


def test_logits_are_gathered_over_tp_in_the_engines_dtype_then_read_by_the_sampler() -> None:
    from flopwise.plan.infer.latency import _logits_gather_and_sample
    from flopwise.plan.infer.shard import make_shard
    from flopwise.plan.roofline import collective_time_s, tier_for
    from flopwise.workload.hf import load_model

    spec = load_model("llama-3.1-70b")
    hw = hardware_from_catalog("h100-sxm", "hgx-h100")
    rows = 512.0
    trt, vllm = get_engine("tensorrt-llm"), get_engine("vllm")
    r = make_rates(hw, trt, "bf16", "bf16")
    one = _logits_gather_and_sample(make_shard(spec, 1, 1, "bf16", "bf16"), rows, hw, r, trt)
    assert one.comm_s == 0.0  # a single rank holds every logit
    eight = make_shard(spec, 8, 1, "bf16", "bf16")
    got = _logits_gather_and_sample(eight, rows, hw, r, trt)
    fp32_rows = rows * spec.vocab * 4.0  # TensorRT-LLM's default float32 logits
    assert got.comm_s == pytest.approx(
        collective_time_s("all_gather", fp32_rows, 8, tier_for(hw, 8, False))
    )
    assert got.activations_s == pytest.approx(fp32_rows / r.bw_bytes_s)
    # vLLM gathers 16-bit logits: half the bytes, so a cheaper gather
    assert _logits_gather_and_sample(eight, rows, hw, r, vllm).comm_s < got.comm_s


def test_the_engine_memory_knob_sizes_the_kv_cache() -> None:
    from flopwise.errors import FlopwiseError
    from flopwise.plan.infer import InferJob, plan_inference
    from flopwise.workload.hf import load_model

    spec = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm", "hgx-h100")

    def kv_gib(fraction: float | None) -> float:
        job = InferJob(
            input_len=128,
            output_len=2048,
            batch=None,
            weight_dtype="fp8",
            kv_dtype="fp8",
            engine="tensorrt-llm",
            memory_fraction=fraction,
        )
        return plan_inference(spec, hw, job).memory.kv_bytes

    default, higher = kv_gib(None), kv_gib(0.95)
    assert kv_gib(0.90) == pytest.approx(default)  # TensorRT-LLM's default
    # a fraction of the memory left after weights and activations: 0.95/0.90 of the same base
    assert higher / default == pytest.approx(0.95 / 0.90, rel=0.02)
    for bad in (0.0, 1.2):
        with pytest.raises(FlopwiseError, match="memory fraction"):
            InferJob(memory_fraction=bad)


def test_later_perf_overview_rows_are_posed_at_the_memory_fraction_they_state() -> None:
    from flopwise.validate.inference_rows import posed_rows

    rows = posed_rows()[0]
    later = [r for r in rows if r.family in ("trtllm015", "trtllm017")]
    assert later and all(r.memory_fraction == 0.95 for r in later)
    assert all("--memory-fraction 0.95" in r.command for r in later)
    assert all(r.memory_fraction is None for r in rows if r.family == "trtllm014")


def test_an_explicit_batch_is_the_engines_sequence_cap() -> None:
    from flopwise.plan.infer import InferJob, plan_inference
    from flopwise.workload.hf import load_model

    spec = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm", "hgx-h100")

    def running(batch: int | None) -> int:
        job = InferJob(input_len=128, output_len=512, batch=batch, engine="vllm", num_requests=2000)
        return int(plan_inference(spec, hw, job).batch)

    assert get_engine("vllm").max_num_seqs == 256
    assert running(None) == 256  # vLLM's default --max-num-seqs
    assert running(600) == 600  # --max-num-seqs 600: memory allows it
    assert running(100) == 100
