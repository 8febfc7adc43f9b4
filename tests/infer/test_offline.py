"""Offline batches (--num-requests): the pass-by-pass engine simulation and the plan on top."""

from __future__ import annotations

import json
import math

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.context import make_context
from flopwise.plan.infer.offline import grid_interpolated, pass_time, simulate
from flopwise.plan.infer.phases import decode_phase, prefill_phase
from flopwise.validate.inference_rows import posed_rows
from flopwise.workload.hf import load_model


def one_second(_decoding: int, _prompt: int) -> float:
    return 1.0


@pytest.mark.parametrize(("n", "cap"), [(4, 4), (10, 4), (9, 3), (1, 8), (7, 100)])
def test_constant_passes_run_in_whole_waves(n: int, cap: int) -> None:
    # budget large enough for every prompt at once: a wave of `cap` requests takes one prompt
    # pass plus output_len - 1 decode passes; the next wave starts when the last one leaves
    osl = 5
    run = simulate(one_second, n, cap, input_len=10, output_len=osl, token_budget=10_000)
    waves = math.ceil(n / cap)
    assert run.makespan_s == pytest.approx(waves * osl)
    assert run.output_tokens_per_s == pytest.approx(n * osl / (waves * osl))
    assert run.concurrency == min(n, cap)
    # the i-th wave's first token comes at the end of its prompt pass, i * osl + 1
    firsts = [(i * osl + 1) * min(cap, n - i * cap) for i in range(waves)]
    assert run.mean_ttft_s == pytest.approx(sum(firsts) / n)
    assert run.mean_tpot_s == pytest.approx(1.0)


def test_token_budget_admits_whole_prompts_per_pass() -> None:
    # 200 tokens a pass, 100-token prompts: the first pass takes two prompts; after that the
    # decoding sequences take budget too, so one prompt joins per pass (pass 1: 2 decoding +
    # 100 < 200, a second prompt would not fit). Worked by hand: joins at passes 0,0,1,2,3,4
    # (first tokens at 1,1,2,3,4,5 s); the last joiner decodes in passes 5 and 6.
    run = simulate(one_second, 6, 100, input_len=100, output_len=3, token_budget=200)
    assert run.makespan_s == pytest.approx(7.0)
    assert run.mean_ttft_s == pytest.approx((1 + 1 + 2 + 3 + 4 + 5) / 6)
    assert run.passes == 7


def test_prompt_longer_than_a_pass_is_chunked() -> None:
    # 250-token prompt, 100 tokens per pass: its first token comes out of the third pass
    run = simulate(one_second, 1, 4, input_len=250, output_len=2, token_budget=100)
    assert run.mean_ttft_s == pytest.approx(3.0)
    assert run.makespan_s == pytest.approx(4.0)


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(FlopwiseError, match="concurrency"):
        simulate(one_second, 3, 0, 10, 10, 100)


def _ctx(isl: int, osl: int):  # type: ignore[no-untyped-def]
    job = InferJob(
        input_len=isl,
        output_len=osl,
        batch=None,
        tp=2,
        weight_dtype="fp8",
        kv_dtype="fp8",
        engine="tensorrt-llm",
    )
    return make_context(load_model("llama-3.1-8b"), hardware_from_catalog("h100-sxm"), job)


@pytest.mark.parametrize(("isl", "osl", "n"), [(128, 128, 3000), (1000, 200, 500)])
def test_anchored_interpolation_matches_timing_every_pass(isl: int, osl: int, n: int) -> None:
    ctx = _ctx(isl, osl)

    def exact(b: int, p: int) -> float:
        return (
            prefill_phase(ctx, p / isl).time_s
            if b == 0
            else decode_phase(ctx, b, prefill_per_step=p).time_s
        )

    fast = simulate(pass_time(ctx), n, 700, isl, osl, 8192)
    slow = simulate(exact, n, 700, isl, osl, 8192)
    assert fast.makespan_s == pytest.approx(slow.makespan_s, rel=0.01)
    # and the interpolation itself is exact at the anchors
    g = grid_interpolated(exact, isl)
    assert g(64, 0) == pytest.approx(exact(64, 0))


def _plan(n: int | None, batch: int | None = None):  # type: ignore[no-untyped-def]
    job = InferJob(
        input_len=500,
        output_len=500,
        batch=batch,
        tp=1,
        weight_dtype="fp8",
        kv_dtype="fp8",
        engine="tensorrt-llm",
        num_requests=n,
    )
    return plan_inference(load_model("llama-3.1-8b"), hardware_from_catalog("h100-sxm"), job)


def test_offline_batch_approaches_the_steady_state_from_below() -> None:
    steady = _plan(None).output_tokens_per_s
    small, large = _plan(2_000), _plan(100_000)
    assert small.mode == "offline"
    # ramp-up and drain cost throughput; their share shrinks as the batch grows
    assert small.output_tokens_per_s < large.output_tokens_per_s <= steady * 1.01
    assert large.output_tokens_per_s == pytest.approx(steady, rel=0.05)


def test_batch_caps_how_many_run_at_once() -> None:
    capped = _plan(2_000, batch=16)
    assert capped.batch == 16
    assert capped.output_tokens_per_s < _plan(2_000).output_tokens_per_s
    # fewer requests than fit: the batch never gets fuller than the requests
    assert _plan(10).batch == 10


def test_published_offline_rows_pose_their_dataset_size() -> None:
    rows = [r for r in posed_rows()[0] if r.family == "trtllm014"]
    assert rows and all(r.num_requests in (1000, 1500, 3000, 30000) for r in rows)
    assert all(f"--num-requests {r.num_requests}" in r.command for r in rows)


def test_cli_offline_json_and_errors() -> None:
    out = run_cli(
        "plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--num-requests", "300",
        "--input-len", "200", "--output-len", "100", "--price-per-gpu-hour", "2", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    run = doc["offline"]
    assert doc["mode"] == "offline" and run["num_requests"] == 300
    assert run["output_tokens"] == 300 * 100
    assert run["cost_usd"] == pytest.approx(2.0 * run["makespan_s"] / 3600)
    assert doc["ttft_ms_interval"] is None  # mostly queueing: no fitted range
    bad = run_cli("plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--num-requests", "0")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    both = run_cli(
        "plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--num-requests", "5", "--sweep"
    )
    assert both.returncode == 2 and "--num-requests" in both.stderr


def test_compare_ranks_offers_by_the_cost_of_the_whole_batch() -> None:
    out = run_cli(
        "compare", "infer", "llama-3.1-8b", "--num-requests", "3000", "--input-len", "500",
        "--output-len", "2000", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["time_metric"], doc["cost_metric"]) == ("makespan_s", "batch_cost_usd")
    assert doc["job"]["num_requests"] == 3000 and "offline batch" in doc["job"]["batch_rule"]
    rows = [r for r in doc["rows"] if r["batch_cost_usd"] is not None]
    assert len(rows) >= 3
    costs = [r["batch_cost_usd"] for r in rows]
    assert costs == sorted(costs)
    for r in rows:
        # the instance's replicas share the batch; the price is the whole instance's
        assert r["num_requests"] == -(-3000 // r["replicas"])
        assert r["batch_cost_usd"] == pytest.approx(r["price_per_hour"] * r["makespan_s"] / 3600)
        lo, hi = r["makespan_s_interval"]
        assert lo < r["makespan_s"] < hi
