"""Online serving with Poisson arrivals (--request-rate R): the open loop's steady state."""

from __future__ import annotations

import json
from dataclasses import replace

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
    output_len=400,
    batch=None,
    weight_dtype="fp8",
    kv_dtype="fp8",
    engine="vllm",
    request_rate=1.0,
)


def _rate(rate: float, **kw: object):  # type: ignore[no-untyped-def]
    return plan_inference(MODEL, H100, replace(BASE, request_rate=rate, **kw))


def test_littles_law_and_the_offered_throughput() -> None:
    plan = _rate(8.0)
    load = plan.extras["arrivals"]
    assert plan.mode == "rate"
    assert plan.output_tokens_per_s == pytest.approx(8.0 * BASE.output_len, rel=1e-12)
    # B = rate x E2E where the two cross (E2E moves in small steps: whole passes, GEMM tiles)
    assert load["mean_running"] == pytest.approx(8.0 * plan.e2e_latency_s, rel=0.01)
    assert plan.e2e_latency_s == pytest.approx(
        plan.ttft_s + (BASE.output_len - 1) * plan.tpot_s, rel=1e-9
    )
    assert plan.intervals.get("output_tokens_per_s") is None  # the offered load, not predicted


def test_prompts_wait_as_in_an_md1_queue() -> None:
    plan = _rate(8.0)
    load = plan.extras["arrivals"]
    ctx_prefill = load["prefill_busy"] / 8.0  # busy = rate x one prompt's prefill
    # the same prefill the plan reports
    assert ctx_prefill == pytest.approx(plan.prefill.time_s, rel=1e-9)
    busy = load["prefill_busy"]
    expected = busy * ctx_prefill / (2 * (1 - busy))
    assert load["prefill_wait_ms"] / 1e3 == pytest.approx(expected, rel=1e-9)


def test_a_trickle_is_one_request_at_a_time_and_more_load_costs_latency() -> None:
    trickle = _rate(0.01)
    alone = plan_inference(MODEL, H100, replace(BASE, request_rate=None, batch=1))
    assert trickle.extras["arrivals"]["mean_running"] < 0.1
    assert trickle.ttft_s == pytest.approx(alone.ttft_s, rel=0.02)
    assert trickle.tpot_s == pytest.approx(alone.tpot_s, rel=0.05)
    plans = [_rate(r) for r in (1.0, 4.0, 12.0)]
    running = [p.extras["arrivals"]["mean_running"] for p in plans]
    assert running == sorted(running)
    assert [p.tpot_s for p in plans] == sorted(p.tpot_s for p in plans)
    assert [p.ttft_s for p in plans] == sorted(p.ttft_s for p in plans)


def test_a_rate_past_what_the_deployment_sustains_is_refused_with_its_limit() -> None:
    top = _rate(1.0).extras["arrivals"]["max_rate_per_s"]
    assert top > 1.0
    assert _rate(0.9 * top).extras["arrivals"]["mean_running"] > 0
    with pytest.raises(FlopwiseError, match=r"at most .* requests/s"):
        _rate(1.2 * top)
    # replicas split the arrivals: twice the replicas sustain twice the rate
    two = _rate(1.5 * top, tp=1, replicas=2)
    assert two.extras["arrivals"]["replica_rate_per_s"] == pytest.approx(0.75 * top)
    assert two.extras["arrivals"]["max_rate_per_s"] == pytest.approx(2 * top, rel=1e-9)


def test_job_and_cli_errors_and_json() -> None:
    with pytest.raises(FlopwiseError, match="request_rate must be a positive number"):
        replace(BASE, request_rate=0.0)
    with pytest.raises(FlopwiseError, match="separate modes"):
        replace(BASE, concurrency=4)
    args = ("plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--engine", "vllm")
    out = run_cli(*args, "--request-rate", "2.5", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["mode"] == "rate" and doc["job"]["request_rate"] == 2.5
    assert set(doc["arrivals"]) >= {"rate_per_s", "mean_running", "max_rate_per_s"}
    assert doc["output_tokens_per_s_interval"] is None and doc["ttft_ms_interval"] is not None
    text = run_cli(*args, "--request-rate", "2.5")
    assert text.returncode == 0 and "arrivals" in text.stdout
    over = run_cli(*args, "--request-rate", "1000")
    assert over.returncode == 2 and "at most" in over.stderr
    assert len(over.stderr.strip().splitlines()) == 1 and "Traceback" not in over.stderr
    bad = run_cli(*args, "--request-rate", "-1")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    both = run_cli(*args, "--request-rate", "1", "--concurrency", "4")
    assert both.returncode == 2 and "--request-rate" in both.stderr
    draft = run_cli(*args, "--request-rate", "1", "--draft", "llama-3.1-8b")
    assert draft.returncode == 2 and "--draft" in draft.stderr
    assert len(draft.stderr.strip().splitlines()) == 1


def test_compare_serves_the_rate_on_every_instance_or_excludes_it() -> None:
    out = run_cli(
        "compare", "infer", "llama-3.1-8b", "--request-rate", "20", "--input-len", "1000",
        "--output-len", "300", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert all(r["output_tokens_per_s"] == pytest.approx(20 * 300) for r in doc["rows"])
    assert any("at most" in e["reason"] for e in doc["excluded"])  # small offers cannot


def test_a_comma_list_is_a_rate_sweep_that_stops_where_the_deployment_saturates(
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    from flopwise.plan.infer.arrivals import plan_rate_sweep

    top = _rate(1.0).extras["arrivals"]["max_rate_per_s"]
    swept = plan_rate_sweep(MODEL, H100, BASE, [2 * top, 0.5, 0.5 * top, 4 * top])
    assert [p.job.request_rate for p in swept.plans] == [0.5, 0.5 * top]
    assert swept.refused_rate_per_s == 2 * top
    assert swept.max_rate_per_s == pytest.approx(top, rel=1e-9)
    assert "at most" in swept.reason
    args = ("plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--engine", "vllm")
    out = run_cli(*args, "--request-rate", "4,1,1000", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["mode"] == "rate-sweep" and doc["job"]["request_rate"] == [1.0, 4.0, 1000.0]
    assert [p["request_rate"] for p in doc["points"]] == [1.0, 4.0]
    assert doc["refused_rate_per_s"] == 1000.0 and doc["max_rate_per_s"] < 1000
    text = run_cli(*args, "--request-rate", "1,4,1000")
    assert text.returncode == 0 and "not sustained" in text.stdout
    cfg = run_cli(*args, "--request-rate", "1,2", "--print-config")
    assert "request-rate = [1.0, 2.0]" in cfg.stdout
    job = tmp_path / "job.toml"
    job.write_text(cfg.stdout)
    again = run_cli("plan", "infer", "--config", str(job), "--json")
    assert [p["request_rate"] for p in json.loads(again.stdout)["points"]] == [1.0, 2.0]
    cmp = run_cli("compare", "infer", "llama-3.1-8b", "--request-rate", "1,2")
    assert cmp.returncode == 2 and "one --request-rate" in cmp.stderr
