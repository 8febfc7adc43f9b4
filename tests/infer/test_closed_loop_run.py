"""``--concurrency C --num-requests N``: a closed-loop benchmark run from a cold start.

``vllm bench serve --max-concurrency C --num-prompts N`` (and SGLang's ``bench_serving``,
AIPerf with a request count) sends C requests at once, then one more as each finishes, and
reports means over the N requests, each timed from its own send. The run is simulated pass by
pass (``offline.simulate`` with a client window); the expectations below are worked by hand.
"""

from __future__ import annotations

import statistics

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.offline import _output_lengths, simulate
from flopwise.workload import load_model


def _one_second(decoding: int, prompt_tokens: int) -> float:
    return 1.0


def test_a_window_of_two_over_four_requests_by_hand() -> None:
    # 1-token prompts, 2 output tokens, every pass 1 s, room for everything in a pass.
    # t=0: requests 1-2 sent; pass 1 prefills both (first tokens at 1 s); pass 2 decodes their
    # second token (done at 2 s); requests 3-4 are sent at 2 s, prefilled in pass 3 (3 s) and
    # done at 4 s. From its send every request sees its first token after 1 s and its last
    # after 2 s; from the run's start the second pair waits 2 s more.
    run = simulate(_one_second, 4, 8, 1, 2, 64, client_window=2)
    assert run.concurrency == 2
    assert run.makespan_s == pytest.approx(4.0)
    assert run.mean_send_s == pytest.approx(1.0)
    assert run.mean_ttft_s == pytest.approx(2.0)
    assert run.mean_ttft_from_send_s == pytest.approx(1.0)
    assert run.mean_latency_from_send_s == pytest.approx(2.0)
    assert run.mean_tpot_s == pytest.approx(1.0)


def test_without_a_window_every_request_is_sent_at_the_start() -> None:
    run = simulate(_one_second, 4, 2, 1, 2, 64)
    assert run.mean_send_s == 0.0
    assert run.mean_ttft_from_send_s == run.mean_ttft_s == pytest.approx(2.0)


def test_a_window_larger_than_the_requests_sends_them_all_at_once() -> None:
    run = simulate(_one_second, 3, 8, 1, 2, 64, client_window=10)
    assert run.mean_send_s == 0.0
    assert run.mean_ttft_s == pytest.approx(1.0)


def test_spread_output_lengths_keep_their_mean_and_range() -> None:
    groups = _output_lengths(0, 1000, 1000, 0.2)
    lengths = [out for n, out in groups for _ in range(n)]
    assert len(lengths) == 1000
    assert min(lengths) >= 800 and max(lengths) <= 1200
    assert statistics.mean(lengths) == pytest.approx(1000, rel=0.01)
    # any prefix is spread too (a low-discrepancy sequence), so small cohorts are not all short
    first = [out for n, out in _output_lengths(0, 10, 1000, 0.2) for _ in range(n)]
    assert max(first) - min(first) > 300
    assert _output_lengths(5, 3, 1000, 0.0) == [(3, 1000)]


def test_spread_lengths_desynchronise_the_waves() -> None:
    # equal lengths: every window finishes together and the next arrives as one burst, so each
    # prompt queues behind the window's others; spread lengths stagger the sends
    def prompt_bound(decoding: int, prompt_tokens: int) -> float:
        return 0.01 + 0.001 * prompt_tokens  # prompts dominate a pass

    waves = simulate(prompt_bound, 400, 64, 100, 100, 1000, client_window=32)
    spread = simulate(prompt_bound, 400, 64, 100, 100, 1000, client_window=32, output_spread=0.2)
    assert spread.mean_ttft_from_send_s < 0.7 * waves.mean_ttft_from_send_s
    assert spread.output_tokens == waves.output_tokens


def _deepseek_on_h200(**kw: object) -> object:
    job = InferJob(
        input_len=922, output_len=922, tp=8, weight_dtype="fp8", kv_dtype="bf16",
        engine="sglang", memory_fraction=0.82, engine_max_tokens=32768, batch=512, **kw,  # type: ignore[arg-type]
    )  # fmt: skip
    return plan_inference(load_model("deepseek-v3"), hardware_from_catalog("h200-sxm"), job)


def test_the_run_reports_the_steady_state_rates_and_the_cold_start_ttft() -> None:
    steady = _deepseek_on_h200(concurrency=16)
    run = _deepseek_on_h200(concurrency=16, num_requests=160, output_spread=0.111)
    assert run.mode == "offline" and run.extras["offline"]["client_window"] == 16
    # the same engine at the same load: per-token rates within a few percent
    assert run.tpot_s == pytest.approx(steady.tpot_s, rel=0.05)
    assert run.output_tokens_per_s == pytest.approx(steady.output_tokens_per_s, rel=0.05)
    # the first window's 16 prompts arrive together: the mean first token comes later
    assert run.ttft_s > steady.ttft_s


def test_bad_combinations_are_one_line_errors() -> None:
    with pytest.raises(FlopwiseError, match="at least as many requests"):
        InferJob(concurrency=8, num_requests=4)
    with pytest.raises(FlopwiseError, match="give num_requests"):
        InferJob(output_spread=0.1)
    with pytest.raises(FlopwiseError, match=r"\[0, 1\)"):
        InferJob(num_requests=10, output_spread=1.0)
    for args, text in (
        (("--concurrency", "2,4", "--num-requests", "40"), "--concurrency sweep"),
        (("--num-requests", "40", "--output-spread", "2"), "[0, 1)"),
        (("--output-spread", "0.1"), "give num_requests"),
    ):
        proc = run_cli("plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", *args)
        assert proc.returncode == 2, proc.stderr
        assert text in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert "Traceback" not in proc.stderr


def test_cli_text_and_json_name_the_run() -> None:
    args = ("plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--concurrency", "8")
    args += ("--num-requests", "80", "--input-len", "512", "--output-len", "256")
    text = run_cli(*args)
    assert text.returncode == 0, text.stderr
    assert "benchmark run" in text.stdout and "from each send" in text.stdout
    doc = run_cli(*args, "--json")
    import json

    d = json.loads(doc.stdout)
    assert d["offline"]["client_window"] == 8 and d["job"]["output_spread"] == 0.0
    assert d["ttft_ms"] > 0 and d["offline"]["mean_send_s"] > 0


def test_compare_runs_the_benchmark_on_every_offer() -> None:
    import json

    args = ("compare", "infer", "llama-3.1-8b", "--accelerators", "h100-sxm,a100-sxm-80gb")
    args += ("--concurrency", "8", "--num-requests", "80", "--output-spread", "0.1")
    out = run_cli(*args, "--input-len", "512", "--output-len", "256", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert {r["accelerator"] for r in rows} >= {"h100-sxm", "a100-sxm-80gb"}
    assert all(r["ttft_ms"] > 0 and r["fits"] for r in rows)
    few = run_cli(*args[:5], "--concurrency", "100", "--num-requests", "10")
    assert few.returncode == 2 and "at least as many" in few.stderr


def test_a_preempting_run_says_it_ignored_the_spread() -> None:
    # vLLM admits on the prompt and preempts by recompute when the pool overflows; that
    # simulation runs equal lengths, and the plan says so rather than dropping the flag silently
    job = InferJob(
        input_len=500, output_len=2000, batch=2000, engine="vllm", num_requests=3000,
        output_spread=0.2,
    )  # fmt: skip
    plan = plan_inference(load_model("llama-3.1-8b"), hardware_from_catalog("h100-sxm"), job)
    assert "preemption" in plan.extras["offline"]
    assert any("--output-spread 0.2 not applied" in n for n in plan.assumptions)
