"""Decode-attention kernel: grouped (XQA and kin) or per-head (TensorRT-LLM's masked MHA)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import MMHA_OPS_PER_SM_CLOCK, get_engine
from flopwise.workload import load_model


def _tpot_s(
    model: str, acc: str, kernel: str | None, dtype: str = "fp8", mmha: float | None = None
) -> float:
    job = InferJob(
        input_len=2048, output_len=2048, batch=64, weight_dtype=dtype, kv_dtype=dtype,
        engine="tensorrt-llm", decode_kernel=kernel,
    )  # fmt: skip
    engine = get_engine("tensorrt-llm")
    if mmha is not None:
        engine = replace(engine, mmha_ops_per_sm_clock=mmha)
    plan = plan_inference(load_model(model), hardware_from_catalog(acc), job, engine=engine)
    return plan.tpot_s


def test_every_engine_defaults_to_a_grouped_kernel() -> None:
    for name in ("tensorrt-llm", "tensorrt-llm-pytorch", "vllm", "sglang", "generic"):
        assert get_engine(name).decode_kernel == "grouped"
    assert _tpot_s("mistral-7b", "h100-sxm", None) == _tpot_s("mistral-7b", "h100-sxm", "grouped")


def test_per_head_kernel_pays_for_every_query_head_where_the_sms_bound_it() -> None:
    """Mistral 7B shares each KV head among 4 query heads: MMHA multiplies every KV element 4
    times on CUDA cores, which on an H100 with an fp8 cache takes longer than reading it."""
    grouped = _tpot_s("mistral-7b", "h100-sxm", "grouped")
    per_head = _tpot_s("mistral-7b", "h100-sxm", "per-head")
    assert per_head > 1.2 * grouped
    # a faster kernel (more multiply-adds per SM per clock) costs less, never below grouped
    faster = _tpot_s("mistral-7b", "h100-sxm", "per-head", mmha=4 * MMHA_OPS_PER_SM_CLOCK)
    assert grouped <= faster < per_head


def test_per_head_kernel_costs_nothing_where_the_kv_bytes_bound_it() -> None:
    """An MHA model (one query head per KV head) with a 16-bit cache on an A100: reading two
    bytes per element takes longer than one multiply-add per element on 108 SMs."""
    grouped = _tpot_s("llama-2-7b", "a100-sxm-80gb", "grouped", dtype="fp16")
    per_head = _tpot_s("llama-2-7b", "a100-sxm-80gb", "per-head", dtype="fp16")
    assert per_head == pytest.approx(grouped)


def test_per_head_kernel_needs_the_sm_count_and_clock() -> None:
    # the catalog has no clock for an H100 PCIe: the rate is unknown, not guessed
    with pytest.raises(FlopwiseError, match="clock"):
        _tpot_s("mistral-7b", "h100-pcie", "per-head")
    done = run_cli("plan", "infer", "mistral-7b", "-a", "h100-pcie", "--decode-kernel", "per-head")
    assert done.returncode != 0
    assert "clock_mhz" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_bad_kernel_name_is_refused() -> None:
    with pytest.raises(FlopwiseError, match="decode kernel must be one of grouped, per-head"):
        InferJob(input_len=8, output_len=8, decode_kernel="mmha")


def test_cli_flag_reaches_the_job_and_the_engine() -> None:
    argv = ["plan", "infer", "mistral-7b", "-a", "h100-sxm", "--engine", "tensorrt-llm"]
    done = run_cli(*argv, "--decode-kernel", "per-head", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["job"]["decode_kernel"] == "per-head"
    assert doc["engine"]["decode_kernel"] == "per-head"
    assert doc["engine"]["mmha_ops_per_sm_clock"] == MMHA_OPS_PER_SM_CLOCK


def test_plan_says_how_it_priced_the_per_head_kernel() -> None:
    def notes(kernel: str) -> str:
        job = InferJob(input_len=128, output_len=128, engine="tensorrt-llm", decode_kernel=kernel)
        plan = plan_inference(load_model("mistral-7b"), hardware_from_catalog("h100-sxm"), job)
        return " ".join(plan.assumptions)

    assert "masked-MHA" in notes("per-head") and "MMHA_OPS_PER_SM_CLOCK" in notes("per-head")
    assert "masked-MHA" not in notes("grouped")


def test_cli_offers_the_kernels_without_importing_the_planner() -> None:
    """The flag's choices come from a module of their own: defining the CLI must not import
    the inference planner (start-up time, benchmarks/startup.py)."""
    import subprocess
    import sys

    from flopwise.plan.decode_kernels import DECODE_KERNELS
    from flopwise.plan.infer.constants import DECODE_KERNELS as PLANNER_KERNELS

    assert DECODE_KERNELS == PLANNER_KERNELS
    code = (
        "import sys, flopwise.cli.job_flags_infer; "
        "print('flopwise.plan.infer.planner' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
