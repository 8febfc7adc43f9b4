"""What a training plan says about its attention kernel (TrainPlan `attention`): which kernel,
where its rate comes from, and the rates the step was priced at."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training
from flopwise.workload.flops import attention_flops_per_token
from flopwise.workload.hf import load_model


def _plan(accelerator: str, seq: int, cp: int = 1, attention: str | None = None):  # type: ignore[no-untyped-def]
    model = load_model("llama-3.1-8b")
    hw = hardware_from_catalog(accelerator)
    job = TrainJob(
        gpus=8, seq_len=seq, global_batch_seqs=8 // cp, framework="nemo", attention=attention
    )
    cons = LayoutConstraints(tp=1, pp=1, dp=8 // cp, cp=cp, microbatch=1, recompute="none")
    return model, plan_training(model, hw, job, cons)


def test_the_reported_rates_are_the_ones_the_step_was_priced_at() -> None:
    # the attention core's seconds in the step (its share of compute) against the FLOPs over
    # peak x reported fraction x sustained fraction, forward and backward (2.5x the forward)
    model, plan = _plan("h100-sxm", 8192)
    d = plan.to_dict()
    att = d["attention"]
    assert att["kernel"] == "flash" and att["basis"] == "die"
    b = d["breakdown"]
    attention_s = d["attention_share"] * (b["compute_s"] + b["recompute_s"])
    rate = d["peak_tflops"] * 1e12 * att["sustained_fraction"]  # bf16: the 16-bit peak
    flops = attention_flops_per_token(model, 8192, "causal") * 8192  # one sequence per GPU
    expected = flops / (rate * att["fwd_fraction_of_peak16"])
    # the backward executes 2.5x the forward's FLOPs (FlashAttention-2 paper, section 4.1)
    expected += 2.5 * flops / (rate * att["bwd_fraction_of_peak16"])
    assert attention_s == pytest.approx(expected, rel=1e-6)


def test_context_parallel_prices_one_chunk_at_its_own_length() -> None:
    _, whole = _plan("h100-sxm", 32768)
    _, split = _plan("h100-sxm", 32768, cp=4)
    a, b = whole.to_dict()["attention"], split.to_dict()["attention"]
    assert a["kernel_len_tokens"] == 32768 and b["kernel_len_tokens"] == 8192
    # a shorter kernel pays its fixed per-block cost over less work
    assert b["bwd_fraction_of_peak16"] < a["bwd_fraction_of_peak16"]


def test_bases_by_die_and_kernel() -> None:
    # A100 has no curve by length: the FlashAttention-2 paper's fractions at head dim 128
    a100 = _plan("a100-sxm-80gb", 4096)[1].to_dict()["attention"]
    assert a100["basis"] == "papers"
    assert (a100["fwd_fraction_of_peak16"], a100["bwd_fraction_of_peak16"]) == (0.60, 0.50)
    # FlashAttention-2 named on an H100: the die's FlashAttention-2 curve, below cuDNN's
    fa2 = _plan("h100-sxm", 4096, attention="flash2")[1].to_dict()["attention"]
    best = _plan("h100-sxm", 4096)[1].to_dict()["attention"]
    assert fa2["basis"] == "die" and fa2["kernel"] == "flash2"
    assert fa2["fwd_fraction_of_peak16"] < 0.6 * best["fwd_fraction_of_peak16"]
    unfused = _plan("h100-sxm", 4096, attention="unfused")[1].to_dict()["attention"]
    assert unfused["basis"] == "gemms" and "fwd_fraction_of_peak16" not in unfused


def test_the_text_view_names_the_kernel_and_its_basis() -> None:
    args = ["plan", "train", "llama-3.1-8b", "-a", "h100-sxm", "--gpus", "8", "--tokens", "1T"]
    proc = run_cli(*args, "--seq-len", "8192", "--framework", "nemo")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "attention kernel 'flash' at" in text and "(the die's measured curve)" in text
    doc = json.loads(run_cli(*args, "--seq-len", "8192", "--json").stdout)
    assert doc["attention"]["source"].startswith("the GH100 die's curve")
