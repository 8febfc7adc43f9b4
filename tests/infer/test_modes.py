"""Batch max, sweep, target TPOT, speculative decoding and CPU-as-accelerator."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from flopwise.cli.main import main
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.speculative import DraftConfig, expected_tokens_per_step
from flopwise.plan.infer.sweep import sweep_batches
from flopwise.plan.infer.target import plan_for_target_tpot, reading_tokens_per_s, seed_check
from flopwise.results.store import ResultStore
from flopwise.workload import load_model

DONE_WHEN = [
    "plan", "infer", "llama-3.1-70b", "--accelerator", "h100-sxm", "--tp", "4",
    "--batch", "32", "--input-len", "2048", "--output-len", "256",
]  # fmt: skip


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_batch_max_sweep_target_and_draft_run(capsys: pytest.CaptureFixture[str]) -> None:
    base = DONE_WHEN[:7]
    code, out, _ = cli(capsys, *base, "--batch", "max", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["mode"] == "continuous" and doc["batch"] == doc["max_batch"] > 32
    code, out, _ = cli(capsys, *base, "--sweep", "--json")
    assert code == 0
    points = json.loads(out)["points"]
    assert len(points) == 64
    assert [p["batch"] for p in points] == sorted({p["batch"] for p in points})
    code, out, _ = cli(capsys, *base, "--target-tpot-ms", "50", "--json")
    assert code == 0
    assert json.loads(out)["gpus"] is not None
    code, out, _ = cli(capsys, *base, "--draft", "llama-3.1-8b", "--json")
    assert code == 0
    assert json.loads(out)["speculative"]["speedup"] > 1.0


def test_expected_tokens_per_step_matches_leviathan() -> None:
    assert expected_tokens_per_step(0.7, 4) == pytest.approx((1 - 0.7**5) / 0.3)
    assert expected_tokens_per_step(0.0, 4) == pytest.approx(1.0)
    assert expected_tokens_per_step(0.9, 1) == pytest.approx(1.9)


def test_speculation_helps_at_batch_1_and_needs_the_same_tokenizer() -> None:
    hw = hardware_from_catalog("h100-sxm")
    target = load_model("llama-3.1-70b")
    job = InferJob(input_len=1024, output_len=256, batch=1, tp=4)
    plan = plan_inference(target, hw, job, draft=DraftConfig(model=load_model("llama-3.1-8b")))
    spec = plan.to_dict()["speculative"]
    assert spec["expected_tokens_per_step"] == pytest.approx(2.7731, rel=1e-3)
    assert 1.2 < spec["speedup"] < 2.77  # never more than the expected tokens per step
    assert spec["tpot_ms"] < plan.tpot_s * 1e3
    assert spec["memory_per_gpu_gib"] > plan.memory.total_bytes / 2**30
    low = plan_inference(
        target, hw, job, draft=DraftConfig(model=load_model("llama-3.1-8b"), acceptance=0.1)
    )
    assert low.to_dict()["speculative"]["speedup"] < 1.0  # a bad draft slows decoding down
    with pytest.raises(FlopwiseError, match="same tokenizer"):
        plan_inference(target, hw, job, draft=DraftConfig(model=load_model("llama-2-7b")))


def test_batch_max_is_continuous_batching_at_the_largest_fitting_concurrency() -> None:
    spec = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("h100-sxm")
    job = InferJob(input_len=512, output_len=512, batch=None)
    plan = plan_inference(spec, hw, job)
    assert plan.mode == "continuous" and plan.fits is True
    assert plan.batch == plan.memory.max_batch > 100
    one = plan_inference(spec, hw, InferJob(input_len=512, output_len=512, batch=1))
    assert plan.output_tokens_per_s > 20 * one.output_tokens_per_s
    # vLLM's scheduler runs at most 256 sequences by default
    capped = plan_inference(
        spec, hw, InferJob(input_len=128, output_len=128, batch=None, engine="vllm")
    )
    assert capped.batch == 256


def test_sweep_throughput_rises_and_latency_grows_with_batch() -> None:
    spec = load_model("llama-3.1-8b")
    hw = hardware_from_catalog("a100-sxm-80gb")
    points = sweep_batches(spec, hw, InferJob(input_len=1024, output_len=128))
    assert len(points) == 64
    assert all(p.fits for p in points)
    tok = [p.output_tokens_per_s for p in points]
    tpot = [p.tpot_s for p in points]
    assert tok[-1] > 10 * tok[0]
    assert all(b >= a * 0.999 for a, b in itertools.pairwise(tpot))


def test_seed_reading_speed_claim() -> None:
    # 70B x 2 bytes x 15 tokens/s = 2100 GB/s is the seed's arithmetic
    check = seed_check(load_model("llama-2-70b"), "bf16")
    assert check["seed_rate_bw_gbps"] == pytest.approx(2100, rel=0.02)
    assert reading_tokens_per_s() == pytest.approx(5.29, rel=0.01)
    assert check["reading_speed_bw_gbps"] == pytest.approx(730, rel=0.03)


def test_target_tpot_finds_bandwidth_and_gpus() -> None:
    spec = load_model("llama-3.1-70b")
    hw = hardware_from_catalog("h100-sxm")
    target = plan_for_target_tpot(spec, hw, InferJob(input_len=1024, output_len=256), 1 / 15)
    # 141 GB of bf16 weights (+ a little KV) per token at 15 tokens/s
    assert target.roofline_bw_gbps == pytest.approx(2130, rel=0.03)
    assert target.required_peak_bw_gbps is not None
    assert target.required_peak_bw_gbps > target.roofline_bw_gbps / 0.9
    assert target.gpus == 2 and target.plan is not None  # 70B bf16 needs two 80 GB GPUs anyway
    assert target.plan.tpot_s <= 1 / 15
    hopeless = plan_for_target_tpot(spec, hw, InferJob(input_len=1024, output_len=256), 1e-3)
    assert hopeless.gpus is None and hopeless.best_tpot_s is not None
    assert hopeless.required_peak_bw_gbps is None  # engine step time alone exceeds 1 ms


def test_cpu_as_accelerator_from_stored_measurements(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "results.sqlite"
    store = ResultStore(db)
    store.add("matmul", {"dtype": "fp32", "best_tflops": 1.5}, {}, accelerator="cpu")
    store.add("memory", {"triad_gbps": 20.0}, {}, accelerator="cpu")
    code, out, err = cli(
        capsys, "plan", "infer", "qwen2.5-7b", "-a", "cpu", "--measured", "latest",
        "--db", str(db), "--input-len", "256", "--output-len", "64", "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    # batch-1 decode reads ~15 GB of bf16 weights at 20 GB/s: about 0.8 s per token
    assert 0.6 < doc["tpot_ms"] / 1e3 < 1.2
    assert doc["precision"]["activation"] == "fp32"
    assert any("only measured rate" in a for a in doc["assumptions"])
    assert doc["mbu"] is None  # no published peak bandwidth for a CPU: unknown, not guessed
