"""Published serving runs no constant was fitted to: TensorRT-LLM v1.0's perf-overview.

Source: NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md at commit 00f37686 (the
v1.0 edition: "NEW for v1.0 RTX 6000 Pro ..."; "Starting with v0.19, testing was performed
using the PyTorch backend"), "Throughput Measurements", Total Output Throughput (tokens/s) of
the FP8 H100 SXM and H200 SXM columns for Llama 3.1 8B (TP1), Llama 3.3 70B (H200 TP1, H100
TP2; the architecture of Llama 3.1 70B) and Llama 3.1 405B (TP8). The newest edition in the
validation set is 0.17 (C++ engines built with ``trtllm-build``); v1.0 runs another runtime
(the PyTorch backend), was read only after every serving constant was last changed, and none
of its rows is in the shared reference file: every prediction here is out of sample.

Posed as the validation poses perf-overview rows from 0.15 on, but with the runtime the
document names (since 2026-11-25: ``--engine tensorrt-llm-pytorch``, the PyTorch backend, whose
Python executor's host time grows with the batch; ``--engine tensorrt-llm`` before), FP8 weights and KV cache, ``--memory-fraction 0.95`` ("In many cases, we also use a higher KV
cache percentage by setting --kv_cache_free_gpu_mem_fraction 0.95"), and the number of
requests the document lists per ISL/OSL. Measured 2026-11-23 on this code: 60 rows, MAPE 7.6%,
bias -6.3% (the planner is a little slow on the newer runtime); worst -23.7% (70B on one H200,
1000/2000), +13.3% (405B on eight H100, 20000/2000). Since serving GEMMs run at the die's
sustained fraction (2026-11-24; FP8 on GH100 0.75 -> 0.73 of MAMF): MAPE 8.6%, bias -7.5%,
worst -25.4% and +12.1% (the same rows). Posed on the PyTorch backend's profile (2026-11-25,
its per-request host time measured on Grace and scaled to these x86 hosts,
plan/infer/constants.py): MAPE 9.4%, bias -8.6%, worst -26.3% / +10.6%.

Not posed here: the B200/GB200 columns (NVFP4), the RTX 6000 Pro tables (pipeline parallel
over PCIe) and the MoE models (Llama 4, Qwen3, with attention data parallelism). Since
2026-11-24 the whole edition, these included, is scored by `flopwise validate` as the unseen
family `trtllm10` (docs/inference-validation.md "Unseen rows").
"""

from __future__ import annotations

import json
import statistics

import pytest

from conftest import run_cli
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.workload import load_model

#: (input, output) tokens -> $num_requests, from the document's dataset table
NUM_REQUESTS = {
    (128, 128): 30000,
    (128, 2048): 3000,
    (128, 4096): 1500,
    (500, 2000): 3000,
    (1000, 1000): 3000,
    (1000, 2000): 1500,
    (2048, 128): 3000,
    (2048, 2048): 1500,
    (5000, 500): 1500,
    (20000, 2000): 1000,
}
LENGTHS = tuple(NUM_REQUESTS)

#: (model, accelerator, tp) -> published output tokens/s, one per LENGTHS entry
V1_0_FP8 = {
    ("llama-3.1-8b", "h200-sxm", 1): (27911, 26221, 18027, 20770, 17744, 16828, 3538, 12194, 3902, 1804),
    ("llama-3.1-8b", "h100-sxm", 1): (28312, 22714, 14325, 17660, 15220, 13899, 3450, 9305, 3459, 1351),
    ("llama-3.1-70b", "h200-sxm", 1): (3803, 4336, 2872, 3666, 2909, 2994, 442, 2003, 566, 283),
    ("llama-3.1-70b", "h100-sxm", 2): (6378, 6651, 4199, 5222, 4205, 4146, 762, 3082, 898, 437),
    ("llama-3.1-405b", "h200-sxm", 8): (3814, 5348, 4741, 4724, 3330, 3722, 456, 2948, 650, 505),
    ("llama-3.1-405b", "h100-sxm", 8): (3627, 4340, 3116, 3994, 2919, 2895, 453, 2296, 610, 345),
}  # fmt: skip

#: Stated tolerances: each row within 30% (twice the serving validation's 12% MAPE, rounded
#: up to cover its spread); the set within the issue's 10% target and its bias within 10%.
ROW_TOLERANCE = 0.30
SET_MAPE = 0.10
SET_BIAS = 0.10


def _plan(model: str, acc: str, tp: int, isl: int, osl: int) -> float:
    job = InferJob(
        input_len=isl,
        output_len=osl,
        batch=None,
        tp=tp,
        weight_dtype="fp8",
        kv_dtype="fp8",
        engine="tensorrt-llm-pytorch",
        num_requests=NUM_REQUESTS[(isl, osl)],
        memory_fraction=0.95,
    )
    plan = plan_inference(load_model(model), hardware_from_catalog(acc), job)
    return float(plan.output_tokens_per_s)


@pytest.fixture(scope="module")
def errors() -> list[tuple[str, float]]:
    out = []
    for (model, acc, tp), published in V1_0_FP8.items():
        for (isl, osl), measured in zip(LENGTHS, published, strict=True):
            predicted = _plan(model, acc, tp, isl, osl)
            out.append((f"{model} {acc} TP{tp} {isl}/{osl}", predicted / measured - 1.0))
    return out


def test_each_unseen_row_within_tolerance(errors: list[tuple[str, float]]) -> None:
    bad = [(name, round(100 * e, 1)) for name, e in errors if abs(e) > ROW_TOLERANCE]
    assert not bad, bad


def test_unseen_set_error_and_bias(errors: list[tuple[str, float]]) -> None:
    assert len(errors) == 60
    mape = statistics.mean(abs(e) for _, e in errors)
    bias = statistics.mean(e for _, e in errors)
    assert mape < SET_MAPE, f"MAPE {mape:.1%}"
    assert abs(bias) < SET_BIAS, f"bias {bias:+.1%}"


def test_the_cli_poses_a_row_as_the_api_does() -> None:
    proc = run_cli(
        "plan", "infer", "llama-3.1-70b", "--accelerator", "h100-sxm", "--tp", "2", "--gpus", "2",
        "--num-requests", "3000", "--input-len", "1000", "--output-len", "1000",
        "--weight-dtype", "fp8", "--kv-dtype", "fp8", "--engine", "trtllm-pytorch",
        "--memory-fraction", "0.95", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cli = json.loads(proc.stdout)["output_tokens_per_s"]
    assert cli == pytest.approx(_plan("llama-3.1-70b", "h100-sxm", 2, 1000, 1000), rel=1e-9)
    # published 4,205 tokens/s
    assert abs(cli / 4205 - 1) < ROW_TOLERANCE
