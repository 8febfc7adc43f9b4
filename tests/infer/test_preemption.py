"""vLLM admits on the prompt and preempts the newest request by recompute when a lockstep
offline batch outgrows its KV pool (plan/infer/preemption.py).

Golden numbers are the closed form of a lockstep batch of N requests in a pool of C tokens:
preemption starts at length L* = C / N, the batch then keeps C / L requests at length L, so
N - C / (I + O) requests are preempted and they had grown to C * ln((I + O) N / C) tokens in all
(each is re-prefilled whole: vLLM docs, Optimization and Tuning > Preemption, "Preempted
requests are recomputed"). The earliest preempted has I + O - L* tokens left to produce.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer.constants import get_engine
from flopwise.plan.infer.job import InferJob
from flopwise.plan.infer.offline import simulate
from flopwise.plan.infer.planner import plan_inference
from flopwise.plan.infer.preemption import RECOMPUTE, simulate_preempting
from flopwise.workload.hf import load_model


def _unit(decoding: int, prompt_tokens: int) -> float:
    return 1.0  # every pass one second: passes are the clock


def test_lockstep_batch_preempts_what_the_pool_cannot_hold() -> None:
    n, isl, osl, pool = 1000, 100, 900, 600_000.0
    run, stats = simulate_preempting(_unit, n, n, isl, osl, 10**9, pool)
    assert stats.preemptions == pytest.approx(n - pool / (isl + osl), rel=0.02)
    recompute = pool * math.log((isl + osl) * n / pool)
    assert stats.recomputed_tokens == pytest.approx(recompute, rel=0.02)
    # the first wave runs output_len passes; the earliest preempted then needs I + O - C/N more
    assert run.passes == pytest.approx(osl + (isl + osl - pool / n), abs=5)
    assert run.output_tokens == n * osl


def test_a_batch_that_fits_runs_as_without_preemption() -> None:
    n, isl, osl = 200, 128, 512
    run, stats = simulate_preempting(_unit, n, n, isl, osl, 8192, float(n * (isl + osl)))
    plain = simulate(_unit, n, n, isl, osl, 8192)
    assert stats.preemptions == 0 and stats.recomputed_tokens == 0
    assert run.makespan_s == pytest.approx(plain.makespan_s)
    assert run.passes == plain.passes


def test_a_request_longer_than_the_pool_is_refused() -> None:
    with pytest.raises(FlopwiseError, match="does not fit"):
        simulate_preempting(_unit, 4, 4, 1000, 1000, 8192, 1500.0)


def test_only_vllm_preempts_by_recompute() -> None:
    assert get_engine("vllm").preemption == RECOMPUTE
    assert get_engine("tensorrt-llm").preemption == ""  # GUARANTEED_NO_EVICT admission


def _offline(model: str, isl: int, osl: int, n: int, preemption: str) -> dict:
    job = InferJob(
        input_len=isl,
        output_len=osl,
        batch=n,
        num_requests=n,
        tp=8,
        weight_dtype="fp8",
        kv_dtype="fp8",
        engine="vllm",
    )
    engine = replace(get_engine("vllm"), preemption=preemption)
    hw = hardware_from_catalog("mi300x")
    return plan_inference(load_model(model), hw, job, engine=engine).to_dict()


def test_405b_on_mi300x_outgrows_its_pool_at_4096_output_tokens() -> None:
    # AMD's vLLM table: 1500 prompts of 128 + 4096 tokens, --max-num-seqs 1500, TP8 FP8 on
    # 8x MI300X. At full length they hold 1500 x 4224 tokens, more than the pool of the ~45 GiB
    # per GPU that weights leave in 0.9 x 192 GiB.
    with_p = _offline("llama-3.1-405b", 128, 4096, 1500, RECOMPUTE)
    without = _offline("llama-3.1-405b", 128, 4096, 1500, "")
    p = with_p["offline"]["preemption"]
    assert p["peak_demand_tokens"] == 1500 * 4224 > p["kv_capacity_tokens"]
    assert p["preemptions"] > 0 and p["recomputed_tokens"] > 0
    assert with_p["output_tokens_per_s"] < without["output_tokens_per_s"]
    assert "preemption" not in without["offline"]


def test_a_batch_that_fits_its_pool_is_unchanged() -> None:
    with_p = _offline("llama-3.1-70b", 128, 2048, 3200, RECOMPUTE)
    without = _offline("llama-3.1-70b", 128, 2048, 3200, "")
    assert "preemption" not in with_p["offline"]
    assert with_p["output_tokens_per_s"] == pytest.approx(without["output_tokens_per_s"])


def test_amd_vllm_rows_pose_their_token_budget() -> None:
    # AMD's vLLM throughput command runs --max-num-batched-tokens 131072
    # (ROCm/vllm docs/dev-docker/README.md); the planner's vLLM default is 8192
    from flopwise.validate.inference_rows import posed_rows

    rows = [r for r in posed_rows()[0] if r.family == "rocmvllm" and r.num_requests]
    assert rows and all(r.engine_max_tokens == 131072 for r in rows)
    assert all("--engine-max-tokens 131072" in r.command for r in rows)


def test_a_larger_token_budget_leaves_a_smaller_kv_pool() -> None:
    from flopwise.plan.infer.context import make_context
    from flopwise.plan.infer.preemption import kv_capacity_tokens

    hw, spec = hardware_from_catalog("mi300x"), load_model("llama-3.1-405b")
    pools = []
    for budget in (8192, 131072):
        job = InferJob(
            input_len=128, output_len=4096, batch=1500, num_requests=1500, tp=8,
            weight_dtype="fp8", kv_dtype="fp8", engine="vllm", engine_max_tokens=budget,
        )  # fmt: skip
        pools.append(kv_capacity_tokens(make_context(spec, hw, job), 1500))
    assert pools[0] is not None and pools[1] is not None
    assert pools[1] < pools[0]


def test_vllm_all_reduces_of_8_mib_and_more_take_the_ring() -> None:
    # vLLM's CustomAllreduce(max_size=8192 * 1024): should_custom_ar needs inp_size < max_size
    from flopwise.plan.infer.comm import allreduce_s

    hw, vllm = hardware_from_catalog("mi300x"), get_engine("vllm")
    cheapest = replace(vllm, custom_allreduce_max_bytes=None)
    small, large = 2 * 2**20, 64 * 2**20
    assert allreduce_s(small, 8, hw, vllm) == allreduce_s(small, 8, hw, cheapest)
    assert allreduce_s(large, 8, hw, vllm) > allreduce_s(large, 8, hw, cheapest)
    # AMD's rccl-tests on 8x MI300X (ROCm blog, 2025-03): 64 MiB all-reduce in 429 us; the
    # planner's ring uses 0.8 of the 448 GB/s links, so it sits within ~15% below that
    assert allreduce_s(large, 8, hw, vllm) == pytest.approx(429.1e-6, rel=0.15)
