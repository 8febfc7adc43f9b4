"""FP8 context (prefill) attention: what trtllm-bench's FP8 builds run (use_fp8_context_fmha)."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import FP8_ATTENTION_SPEEDUP, get_engine
from flopwise.workload import load_model


def _ttft_s(dtype: str, fp8_context: bool | None, isl: int = 32768) -> float:
    job = InferJob(
        input_len=isl, output_len=1, batch=1, weight_dtype=dtype, kv_dtype=dtype,
        engine="tensorrt-llm", fp8_context_attention=fp8_context,
    )  # fmt: skip
    plan = plan_inference(load_model("llama-3.1-8b"), hardware_from_catalog("h100-sxm"), job)
    return plan.ttft_s


def test_only_tensorrt_llm_profiles_run_fp8_context_attention() -> None:
    assert get_engine("tensorrt-llm").fp8_context_attention is True
    for name in ("vllm", "sglang", "generic"):
        assert get_engine(name).fp8_context_attention is False


def test_long_fp8_prefill_is_faster_with_fp8_attention() -> None:
    on, off = _ttft_s("fp8", True), _ttft_s("fp8", False)
    assert on < off
    # at 32K tokens attention is most of an 8B prefill, and only attention speeds up: the gain
    # is more than a tenth and less than the kernel ratio itself
    assert 1.1 < off / on < FP8_ATTENTION_SPEEDUP
    assert _ttft_s("fp8", None) == pytest.approx(on)  # the engine's default is on


def test_sixteen_bit_jobs_ignore_the_switch() -> None:
    assert _ttft_s("bf16", True) == pytest.approx(_ttft_s("bf16", False))


def test_cli_flag_reaches_the_job_and_the_engine() -> None:
    argv = ["plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--weight-dtype", "fp8"]
    argv += ["--engine", "tensorrt-llm", "--input-len", "4096", "--output-len", "16"]
    done = run_cli(*argv, "--no-fp8-context-attention", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["job"]["fp8_context_attention"] is False
    assert doc["engine"]["fp8_context_attention"] is False


def test_compare_states_the_switch_in_its_job() -> None:
    argv = ["compare", "infer", "llama-3.1-8b", "--accelerators", "h100-sxm", "--weight-dtype"]
    argv += ["fp8", "--engine", "tensorrt-llm", "--no-fp8-context-attention", "--json"]
    done = run_cli(*argv)
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)["job"]
    assert job["fp8_context_attention"] is False
    assert job["allow_long_context"] is False
