"""A Python executor's host time grows with the requests it walks each step (TensorRT-LLM's
PyTorch backend: 45.11 ms per iteration for 1,536 requests per rank on GB200, NVIDIA/
TensorRT-LLM PR #10273); under its overlap scheduler only what exceeds the GPU's step shows.
The C++ runtime's profile (``tensorrt-llm``) keeps a fixed host time per step."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import run_cli
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import (
    HOST_SPEEDUP_X86_OVER_GRACE,
    TRTLLM_PYTORCH_HOST_S_PER_SEQ,
    TRTLLM_PYTORCH_STEP_OVERHEAD_S,
    get_engine,
    host_s_per_request,
)
from flopwise.plan.infer.latency import engine_overhead
from flopwise.plan.infer.speculative import DraftConfig, expected_tokens_per_step
from flopwise.validate.inference_rows import posed_rows
from flopwise.workload import load_model

PYT = get_engine("tensorrt-llm-pytorch")
CPP = get_engine("tensorrt-llm")


def test_the_per_request_host_time_is_the_published_measurement() -> None:
    # 45.11 ms per iteration, 1,536 requests per attention-DP rank (PR #10273)
    assert pytest.approx(29.37e-6, rel=1e-3) == TRTLLM_PYTORCH_HOST_S_PER_SEQ
    assert PYT.host_s_per_seq == TRTLLM_PYTORCH_HOST_S_PER_SEQ and PYT.host_overlap
    assert PYT.step_overhead_s == TRTLLM_PYTORCH_STEP_OVERHEAD_S
    assert CPP.host_s_per_seq == 0.0 and not CPP.host_overlap


def test_grace_hosts_take_the_measured_time_and_x86_hosts_less() -> None:
    # one PyTorch Linear forward's CPU time: 37.08 us on GB200, 13.48 us on a Xeon 8480C
    # (TransformerEngine issue #2053)
    assert pytest.approx(2.75, abs=0.01) == HOST_SPEEDUP_X86_OVER_GRACE
    assert host_s_per_request(PYT, "gb200") == TRTLLM_PYTORCH_HOST_S_PER_SEQ
    assert host_s_per_request(PYT, "gh200") == TRTLLM_PYTORCH_HOST_S_PER_SEQ
    for x86 in ("b200", "h100-sxm", "h200-sxm", "mi300x"):
        assert host_s_per_request(PYT, x86) == pytest.approx(
            TRTLLM_PYTORCH_HOST_S_PER_SEQ / HOST_SPEEDUP_X86_OVER_GRACE
        )
    assert host_s_per_request(CPP, "gb200") == 0.0
    # the backend changes the host, not the kernels, memory or batching
    assert replace(PYT, name=CPP.name, step_overhead_s=CPP.step_overhead_s) == replace(
        CPP,
        host_s_per_seq=PYT.host_s_per_seq,
        host_overlap=True,
        eager_python_dispatch=True,
        source=PYT.source,
        features=PYT.features,
    )


def test_overlapped_host_time_shows_only_beyond_the_gpu_step() -> None:
    host = 1000 * TRTLLM_PYTORCH_HOST_S_PER_SEQ  # 29.4 ms for 1,000 requests
    fixed = PYT.step_overhead_s
    assert engine_overhead(PYT, False, "gb200", 1000, device_s=0.050).overhead_s == pytest.approx(
        fixed
    )
    assert engine_overhead(PYT, False, "gb200", 1000, device_s=0.010).overhead_s == pytest.approx(
        fixed + host - 0.010
    )
    serial = replace(PYT, host_overlap=False)
    assert engine_overhead(
        serial, False, "gb200", 1000, device_s=0.050
    ).overhead_s == pytest.approx(fixed + host)
    assert (
        engine_overhead(CPP, False, "gb200", 1000, device_s=0.010).overhead_s == CPP.step_overhead_s
    )


def _tpot(model: str, engine: str, batch: int, acc: str = "h100-sxm") -> float:
    job = InferJob(
        input_len=128, output_len=128, batch=batch, weight_dtype="fp8", kv_dtype="fp8",
        engine=engine,
    )  # fmt: skip
    return plan_inference(load_model(model), hardware_from_catalog(acc), job).tpot_s


@pytest.mark.parametrize("acc", ["h100-sxm", "gb200"])
def test_a_large_batch_is_bound_by_the_host_or_the_gpu_whichever_is_longer(acc: str) -> None:
    for batch in (256, 2048, 4096):
        host = batch * host_s_per_request(PYT, acc)
        gpu = _tpot("llama-3.1-8b", "tensorrt-llm", batch, acc) - CPP.step_overhead_s
        tpot = _tpot("llama-3.1-8b", "tensorrt-llm-pytorch", batch, acc)
        assert tpot == pytest.approx(PYT.step_overhead_s + max(gpu, host), rel=1e-9)


def test_on_grace_a_large_batch_of_a_small_model_is_host_bound() -> None:
    # 4,096 requests: 120 ms of host work on Grace, more than the GPU's step of an 8B model
    cpp = _tpot("llama-3.1-8b", "tensorrt-llm", 4096, "gb200")
    assert cpp < 4096 * TRTLLM_PYTORCH_HOST_S_PER_SEQ
    assert _tpot("llama-3.1-8b", "tensorrt-llm-pytorch", 4096, "gb200") > 1.2 * cpp


def test_a_small_batch_hides_the_host_under_the_gpu_step() -> None:
    # 8 requests: 0.2 ms of host work under a multi-millisecond step; only the fixed part differs
    pyt, cpp = (
        _tpot("llama-3.1-70b", "tensorrt-llm-pytorch", 8),
        _tpot("llama-3.1-70b", "tensorrt-llm", 8),
    )
    assert pyt - cpp == pytest.approx(PYT.step_overhead_s - CPP.step_overhead_s, rel=1e-6)


def test_attention_dp_ranks_each_walk_their_own_requests() -> None:
    spec, hw = load_model("qwen3-30b-a3b"), hardware_from_catalog("gb200")

    def decode_overhead(dp: bool) -> float:
        job = InferJob(
            input_len=128, output_len=128, batch=4096, tp=4, ep=4, attention_dp=dp,
            weight_dtype="fp8", kv_dtype="fp8", engine="tensorrt-llm-pytorch",
        )  # fmt: skip
        return plan_inference(spec, hw, job).decode.breakdown.overhead_s

    # one executor walks 4,096 requests under TP (120 ms on Grace), each of four 1,024 under
    # attention DP
    tp, dp = decode_overhead(False), decode_overhead(True)
    assert tp > 4096 * TRTLLM_PYTORCH_HOST_S_PER_SEQ / 2
    assert tp > 4 * dp


def test_validation_poses_the_v1_tables_on_the_pytorch_backend() -> None:
    posed, _ = posed_rows()
    engines = {r.family: set() for r in posed}
    for r in posed:
        engines[r.family].add(r.engine)
    assert engines["trtllm10"] == {"tensorrt-llm-pytorch"}
    for family in ("trtllm014", "trtllm015", "trtllm017", "trtllm09"):
        assert engines[family] == {"tensorrt-llm"}


def test_cli_names_the_backend_and_refuses_an_unknown_engine() -> None:
    ok = run_cli(
        "plan", "infer", "llama-3.1-8b", "--accelerator", "h100-sxm", "--batch", "512",
        "--input-len", "128", "--output-len", "128", "--engine", "trtllm-pytorch",
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert "per running request" in ok.stdout
    js = run_cli(
        "plan", "infer", "llama-3.1-8b", "--accelerator", "h100-sxm", "--batch", "512",
        "--input-len", "128", "--output-len", "128", "--engine", "trtllm-pytorch", "--json",
    )  # fmt: skip
    engine = json.loads(js.stdout)["engine"]
    assert engine["name"] == "tensorrt-llm-pytorch" and engine["host_overlap"] is True
    assert engine["host_s_per_seq"] == TRTLLM_PYTORCH_HOST_S_PER_SEQ  # as measured on Grace
    assert engine["host_s_per_request"] == pytest.approx(
        TRTLLM_PYTORCH_HOST_S_PER_SEQ / HOST_SPEEDUP_X86_OVER_GRACE
    )
    bad = run_cli(
        "plan", "infer", "llama-3.1-8b", "--accelerator", "h100-sxm", "--engine", "trtllm-python"
    )
    assert bad.returncode != 0
    assert "Traceback" not in bad.stderr
    assert "tensorrt-llm-pytorch" in bad.stderr


def test_a_draft_model_pays_the_host_once_per_iteration() -> None:
    # speculative decoding: k draft steps and one verify step make one executor iteration, so the
    # per-request host time is not charged k + 1 times
    target, draft = load_model("llama-3.1-70b"), DraftConfig(model=load_model("llama-3.1-8b"))
    hw = hardware_from_catalog("gb200")

    def spec_tpot(engine: str) -> float:
        job = InferJob(
            input_len=128, output_len=128, batch=1024, tp=4, weight_dtype="fp8",
            kv_dtype="fp8", engine=engine,
        )  # fmt: skip
        plan = plan_inference(target, hw, job, draft=draft)
        return float(plan.to_dict()["speculative"]["tpot_ms"]) / 1e3

    k = draft.tokens
    host = 1024 * TRTLLM_PYTORCH_HOST_S_PER_SEQ  # 30 ms per iteration on Grace
    extra = spec_tpot("tensorrt-llm-pytorch") - spec_tpot("tensorrt-llm")
    per_iteration = extra * expected_tokens_per_step(draft.acceptance, k)
    assert per_iteration < 1.05 * (host + PYT.step_overhead_s)
