"""``--scheduler-poll-steps N``: a scheduler that looks at new requests only every N decode steps.

SGLang's ``--scheduler-recv-interval N`` ("the interval to poll requests in scheduler") and
``--num-continuous-decode-steps N`` ("may also increase time-to-first-token latency"), and vLLM
V0's multi-step scheduling, admit a request that arrives while others decode only at the end of
a run of N steps. The expectations below are worked by hand from that rule.
"""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from importlib import resources

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.offline import simulate
from flopwise.validate.online import _command
from flopwise.workload import load_model

H100 = hardware_from_catalog("h100-sxm")
MODEL = load_model("llama-3.1-8b")
BASE = InferJob(
    input_len=2000,
    output_len=500,
    batch=None,
    weight_dtype="fp8",
    kv_dtype="fp8",
    engine="sglang",
    concurrency=8,
)


def _plan(**kw: object):  # type: ignore[no-untyped-def]
    return plan_inference(MODEL, H100, replace(BASE, **kw))


def test_the_steady_state_waits_half_the_extra_steps_for_the_look() -> None:
    every = _plan()
    tenth = _plan(scheduler_poll_steps=10)
    # the decode steps themselves are the same; a new prompt waits (10 - 1) / 2 of them more
    assert tenth.tpot_s == pytest.approx(every.tpot_s, rel=1e-9)
    load = tenth.extras["online"]
    assert load["poll_wait_ms"] == pytest.approx(4.5 * tenth.tpot_s * 1e3)
    assert every.extras["online"]["poll_wait_ms"] == 0.0
    assert tenth.ttft_s - every.ttft_s == pytest.approx(4.5 * every.tpot_s, rel=1e-6)
    # a slot waiting for the look emits no token: the closed loop's throughput falls with it
    assert tenth.output_tokens_per_s < every.output_tokens_per_s
    assert "every 10 decode steps" in " ".join(tenth.assumptions)


def test_one_request_in_flight_finds_the_engine_idle() -> None:
    # the next request is sent when the only one finishes: nothing decodes, the loop looks
    lone = _plan(concurrency=1)
    polled = _plan(concurrency=1, scheduler_poll_steps=30)
    assert polled.extras["online"]["poll_wait_ms"] == 0.0
    assert polled.ttft_s == pytest.approx(lone.ttft_s)


def test_open_loop_arrivals_wait_when_others_are_decoding() -> None:
    # Poisson arrivals see B others running on average (PASTA): the engine decodes when an
    # arrival comes with probability 1 - exp(-B) (a Poisson count of the others)
    base = replace(BASE, concurrency=None, request_rate=2.0)
    every = plan_inference(MODEL, H100, base)
    polled = plan_inference(MODEL, H100, replace(base, scheduler_poll_steps=5))
    load = polled.extras["arrivals"]
    running = load["mean_running"]
    expected = 2.0 * polled.tpot_s * (1.0 - math.exp(-running))
    assert load["poll_wait_ms"] == pytest.approx(expected * 1e3, rel=1e-6)
    assert polled.ttft_s > every.ttft_s


def _one_second(decoding: int, prompt_tokens: int) -> float:
    return 1.0


def test_a_closed_loop_run_admits_at_the_next_look_by_hand() -> None:
    # 1-token prompts, every pass 1 s, a window of 2 over 3 requests, poll every 3 decode steps.
    # Request A (output 2) and B (output 6) are sent at 0 and prefilled in pass 1 (t=1); the
    # scheduler looks again at pass 2. A decodes its last token in pass 2 (t=2) and the client
    # sends C at t=2. Passes 2, 3, 4 are decode passes; the look after pass 2 reset the count,
    # so the next look is before pass 5: C is prefilled in pass 5 (first token t=5), 3 s after
    # its send. Without polling C joins at pass 3 (t=3), 1 s after its send.
    lengths = {0: 2, 1: 6, 2: 2}

    def run(poll: int):  # type: ignore[no-untyped-def]
        import flopwise.plan.infer.offline as off

        real = off._output_lengths
        off._output_lengths = lambda first, count, mean, spread: [  # type: ignore[assignment]
            (1, lengths[j]) for j in range(first, first + count)
        ]
        try:
            return simulate(_one_second, 3, 8, 1, 2, 64, client_window=2, poll_steps=poll)
        finally:
            off._output_lengths = real

    every, polled = run(1), run(3)
    # TTFT from send: A and B 1 s each; C 1 s (every step) or 3 s (every third)
    assert every.mean_ttft_from_send_s == pytest.approx((1 + 1 + 1) / 3)
    assert polled.mean_ttft_from_send_s == pytest.approx((1 + 1 + 3) / 3)


def test_polling_only_affects_a_client_that_sends_during_the_run() -> None:
    # an offline batch is received whole at the start: nothing waits for a look
    def prompt_bound(decoding: int, prompt_tokens: int) -> float:
        return 0.01 + 0.001 * prompt_tokens

    plain = simulate(prompt_bound, 200, 16, 100, 50, 1000)
    polled = simulate(prompt_bound, 200, 16, 100, 50, 1000, poll_steps=30)
    assert polled == plain
    # with a client window the look delays the prompts the client sends
    window = simulate(prompt_bound, 200, 16, 100, 50, 1000, client_window=16)
    slow = simulate(prompt_bound, 200, 16, 100, 50, 1000, client_window=16, poll_steps=30)
    assert slow.mean_ttft_from_send_s > window.mean_ttft_from_send_s
    assert slow.makespan_s > window.makespan_s


def test_a_benchmark_run_plan_says_how_often_the_scheduler_looks() -> None:
    run = replace(BASE, num_requests=80, concurrency=8)
    plain = plan_inference(MODEL, H100, run)
    polled = plan_inference(MODEL, H100, replace(run, scheduler_poll_steps=10))
    assert polled.ttft_s > plain.ttft_s
    assert "every 10 decode steps" in " ".join(polled.assumptions)
    assert "looks at the client's new requests" not in " ".join(plain.assumptions)


def test_bad_values_are_refused_in_one_line() -> None:
    with pytest.raises(FlopwiseError, match="scheduler_poll_steps must be a positive integer"):
        replace(BASE, scheduler_poll_steps=0)
    proc = run_cli(
        "plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--concurrency", "8",
        "--scheduler-poll-steps", "0",
    )  # fmt: skip
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "scheduler-poll-steps" in proc.stderr


def test_cli_json_carries_the_setting_and_the_wait() -> None:
    import json

    proc = run_cli(
        "plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--engine", "sglang",
        "--concurrency", "16", "--scheduler-poll-steps", "10", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["job"]["scheduler_poll_steps"] == 10
    assert out["online"]["poll_wait_ms"] == pytest.approx(4.5 * out["tpot_ms"], rel=1e-6)


def test_the_published_runs_are_posed_with_their_recipes_setting() -> None:
    # InferenceX recipes: B200/B300 TP8 --scheduler-recv-interval 10 below 16 in flight and 30
    # from 16, TP4 10; MI300X/MI325X --num-continuous-decode-steps 4, MI355X 4 until the
    # recipe's change of 2026-05-03 and 8 after; H200 neither
    path = resources.files("flopwise.catalog").joinpath("data/published/online_runs.csv")
    with path.open() as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    expect = {
        "inferencex_dsr1_fp8_b300_sglang_tp8_1024_1024_c4_ttft_ms": "10",
        "inferencex_dsr1_fp8_b300_sglang_tp8_1024_1024_c64_ttft_ms": "30",
        "inferencex_dsr1_fp8_b200_sglang_tp4_8192_1024_c32_ttft_ms": "10",
        "inferencex_dsr1_fp8_mi300x_sglang_1024_1024_c4_ttft_ms": "4",
        "inferencex_dsr1_fp8_mi355x_sglang_1024_8192_c4_ttft_ms": "4",  # run 2026-03-05
        "inferencex_dsr1_fp8_mi355x_sglang_1024_1024_c4_ttft_ms": "8",  # run 2026-05-27
        "inferencex_dsr1_fp8_h200_sglang_1024_1024_c4_ttft_ms": "",
    }
    for rid, steps in expect.items():
        row = rows[rid]
        assert row["scheduler_poll_steps"] == steps, rid
        command = _command(row)
        assert ("--scheduler-poll-steps" in command) == bool(steps), rid
        if steps:
            assert f"--scheduler-poll-steps {steps}" in command


def test_compare_prices_every_offer_with_the_same_looks() -> None:
    import json

    def first_ttft(*extra: str) -> tuple[str, float]:
        proc = run_cli(
            "compare", "infer", "llama-3.1-8b", "--concurrency", "16", *extra, "--json"
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        row = out["rows"][0]
        return row["accelerator"], float(row["ttft_ms"])

    acc, plain = first_ttft("--accelerators", "h100-sxm")
    _, polled = first_ttft("--accelerators", "h100-sxm", "--scheduler-poll-steps", "10")
    assert acc == "h100-sxm"
    assert polled > plain
