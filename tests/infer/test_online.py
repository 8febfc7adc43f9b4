"""Online serving (--concurrency N): a closed loop of N requests in flight, in its steady state."""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import pairwise

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.workload import load_model

H100 = hardware_from_catalog("h100-sxm")
MODEL = load_model("llama-3.1-8b")
BASE = InferJob(
    input_len=2000,
    output_len=500,
    batch=None,
    weight_dtype="fp8",
    kv_dtype="fp8",
    engine="vllm",
    concurrency=1,
)


def _online(concurrency: int, **kw: object):  # type: ignore[no-untyped-def]
    return plan_inference(MODEL, H100, replace(BASE, concurrency=concurrency, **kw))


def test_one_request_in_flight_is_a_lone_prompt_then_a_lone_decode() -> None:
    one = _online(1)
    static = plan_inference(MODEL, H100, replace(BASE, concurrency=None, batch=1))
    load = one.extras["online"]
    assert one.mode == "online" and one.batch == 1
    assert load["queue_wait_ms"] == 0 and load["prefill_wait_ms"] == 0
    # the prompt alone (vLLM's 8192-token passes take it whole), then batch-1 decode steps that
    # carry 1/500 of a prompt each
    assert load["prefill_chunks"] == 1
    assert one.ttft_s == pytest.approx(static.ttft_s, rel=0.01)
    assert static.tpot_s < one.tpot_s < 1.1 * static.tpot_s


def test_throughput_is_the_closed_loop_identity() -> None:
    plan = _online(32)
    e2e_service = plan.e2e_latency_s - plan.extras["online"]["queue_wait_ms"] / 1e3
    assert plan.output_tokens_per_s == pytest.approx(
        plan.batch * BASE.output_len / e2e_service, rel=1e-9
    )
    assert plan.e2e_latency_s == pytest.approx(
        plan.ttft_s + (BASE.output_len - 1) * plan.tpot_s, rel=1e-9
    )


def test_more_requests_in_flight_cost_latency_and_buy_throughput() -> None:
    plans = [_online(c) for c in (1, 4, 16, 64)]
    assert all(p.extras["online"]["queue_wait_ms"] == 0 for p in plans)
    for a, b in pairwise(plans):
        assert b.tpot_s > a.tpot_s and b.ttft_s > a.ttft_s
        assert b.output_tokens_per_s > a.output_tokens_per_s
    # prompts wait behind each other's prefill as the arrival rate grows
    busy = [p.extras["online"]["prefill_busy"] for p in plans]
    assert busy[0] == 0 and busy == sorted(busy) and busy[-1] < 1


def test_beyond_what_runs_at_once_requests_queue_by_littles_law() -> None:
    full = _online(256)  # vLLM runs at most max_num_seqs 256
    capacity = full.extras["online"]["capacity"]
    assert capacity == 256 and full.batch == 256 and full.extras["online"]["queue_wait_ms"] == 0
    over = _online(400)
    load = over.extras["online"]
    assert over.batch == capacity and load["running"] == capacity
    service_e2e = over.e2e_latency_s - load["queue_wait_ms"] / 1e3
    # 144 requests wait while 256 are served at 256 / E2E per second
    assert load["queue_wait_ms"] / 1e3 == pytest.approx((400 - 256) * service_e2e / 256, rel=1e-9)
    assert over.output_tokens_per_s == pytest.approx(full.output_tokens_per_s, rel=1e-9)
    assert over.tpot_s == pytest.approx(full.tpot_s, rel=1e-9)


def test_batch_caps_what_runs_and_replicas_share_the_load() -> None:
    capped = _online(64, batch=16)
    assert capped.batch == 16 and capped.extras["online"]["queue_wait_ms"] > 0
    one = _online(8)
    two = _online(16, tp=1, replicas=2)  # 16 in flight over 2 replicas: 8 each
    assert two.extras["online"]["concurrency"] == 8 and two.batch == 8
    assert two.output_tokens_per_s == pytest.approx(2 * one.output_tokens_per_s, rel=1e-9)
    assert two.ttft_s == pytest.approx(one.ttft_s, rel=1e-9)


def test_a_long_prompt_is_prefilled_in_passes_of_the_token_budget() -> None:
    long = _online(4, input_len=20000, engine_max_tokens=4096)
    load = long.extras["online"]
    # 20,000 prompt tokens beside 3 decode tokens in passes of 4,096: 5 passes
    assert load["prefill_chunks"] == 5
    whole = _online(4, input_len=20000, engine_max_tokens=32768)
    assert whole.extras["online"]["prefill_chunks"] == 1
    assert long.ttft_s > whole.ttft_s  # every pass reads the weights again


def test_job_rejects_bad_concurrency() -> None:
    with pytest.raises(FlopwiseError, match="concurrency must be a positive integer"):
        replace(BASE, concurrency=0)
    # with num_requests it is a closed-loop run of that many (test_closed_loop_run.py): at least
    # as many requests as are in flight
    with pytest.raises(FlopwiseError, match="at least as many requests"):
        replace(BASE, concurrency=8, num_requests=7)


def test_cli_online_json_text_and_errors() -> None:
    args = ("plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--engine", "vllm")
    out = run_cli(*args, "--concurrency", "300", "--weight-dtype", "fp8", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["mode"] == "online" and doc["job"]["concurrency"] == 300
    assert doc["batch"] == 256 and doc["online"]["running"] == 256
    assert doc["online"]["queue_wait_ms"] > 0
    assert doc["ttft_ms_interval"] is None  # queueing, which no interval was fit on
    assert doc["tpot_ms_interval"] is not None
    low = run_cli(*args, "--concurrency", "8", "--json")
    assert json.loads(low.stdout)["ttft_ms_interval"] is not None
    text = run_cli(*args, "--concurrency", "300")
    assert text.returncode == 0 and "online load" in text.stdout and "in the queue" in text.stdout
    bad = run_cli(*args, "--concurrency", "0")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    both = run_cli(*args, "--concurrency", "4", "--num-requests", "2")
    assert both.returncode == 2 and "at least as many requests" in both.stderr
    assert "Traceback" not in both.stderr + bad.stderr


def test_compare_splits_the_load_over_each_instances_replicas() -> None:
    out = run_cli(
        "compare", "infer", "llama-3.1-8b", "--concurrency", "64", "--input-len", "1000",
        "--output-len", "500", "--tp", "2", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["job"]["concurrency"] == 64 and "in flight per instance" in doc["job"]["batch_rule"]
    eight = [r for r in doc["rows"] if r["gpus"] == 8 and r["accelerator"] == "h100-sxm"]
    assert eight, "an 8 x H100 offer"
    row = eight[0]
    assert row["replicas"] == 4 and "16 in flight per replica" in row["ran"]
    one = plan_inference(
        MODEL,
        hardware_from_catalog("h100-sxm"),
        InferJob(input_len=1000, output_len=500, batch=None, tp=2, concurrency=16),
    )
    assert row["output_tokens_per_s"] == pytest.approx(4 * one.output_tokens_per_s, rel=0.01)
    both = run_cli(
        "compare", "infer", "llama-3.1-8b", "--concurrency", "8", "--target-ttft-ms", "100"
    )
    assert both.returncode == 2 and len(both.stderr.strip().splitlines()) == 1


def test_fewer_requests_than_replicas_leave_replicas_idle() -> None:
    four = _online(2, tp=1, replicas=4)  # 2 requests over 4 replicas: 2 busy, 1 each
    one = _online(1)
    assert four.extras["online"]["concurrency"] == 1
    assert four.output_tokens_per_s == pytest.approx(2 * one.output_tokens_per_s, rel=1e-9)
    uneven = _online(6, tp=1, replicas=4)  # 2 each as it goes: 3 replicas' worth
    two = _online(2)
    assert uneven.output_tokens_per_s == pytest.approx(3 * two.output_tokens_per_s, rel=1e-9)


def test_a_comma_list_is_a_concurrency_sweep(tmp_path) -> None:  # type: ignore[no-untyped-def]
    args = ("plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--engine", "vllm")
    out = run_cli(*args, "--concurrency", "1,8,64,400", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["mode"] == "online-sweep" and doc["job"]["concurrency"] == [1, 8, 64, 400]
    points = doc["points"]
    assert [p["concurrency"] for p in points] == [1, 8, 64, 400]
    one = _online(8, input_len=1024, output_len=256, weight_dtype="bf16", kv_dtype=None)
    assert points[1]["output_tokens_per_s"] == pytest.approx(one.output_tokens_per_s, rel=1e-9)
    assert points[-1]["online"]["queue_wait_ms"] > 0 and points[-1]["ttft_ms_interval"] is None
    assert [p["tpot_ms"] for p in points] == sorted(p["tpot_ms"] for p in points)
    text = run_cli(*args, "--concurrency", "1,8")
    assert text.returncode == 0 and "Concurrency sweep" in text.stdout
    # the sweep round-trips through a job file
    cfg = run_cli(*args, "--concurrency", "2,4", "--print-config")
    assert "concurrency = [2, 4]" in cfg.stdout
    job = tmp_path / "job.toml"
    job.write_text(cfg.stdout)
    again = run_cli("plan", "infer", "--config", str(job), "--json")
    assert [p["concurrency"] for p in json.loads(again.stdout)["points"]] == [2, 4]
    bad = run_cli(*args, "--concurrency", "1,x")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    cmp = run_cli("compare", "infer", "llama-3.1-8b", "--concurrency", "1,8")
    assert cmp.returncode == 2 and "one --concurrency" in cmp.stderr


def test_compare_counts_only_the_busy_replicas_of_a_large_instance() -> None:
    out = run_cli(
        "compare", "infer", "llama-3.1-8b", "--concurrency", "8", "--input-len", "1000",
        "--output-len", "300", "--tp", "1", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = [r for r in json.loads(out.stdout)["rows"] if r["replicas"] > 8]
    assert rows, "an instance with more replicas than requests in flight"
    for row in rows:
        assert f"(8 of {row['replicas']} replicas busy)" in row["ran"]
        lo, hi = row["output_tokens_per_s_interval"]
        assert lo < row["output_tokens_per_s"] < hi
