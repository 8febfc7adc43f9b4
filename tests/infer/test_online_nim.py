"""Online serving against a published concurrency sweep: NVIDIA NIM's benchmarking page.

Source: https://docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance.md ("Performance":
"latency and throughput numbers for Llama models powered by NVIDIA NIM", measured with AIPerf),
Llama-3.3-70b-instruct, NIM 1.8.0, "2 x H100 80G", "fp8 TP2", 5000 input / 500 output tokens,
concurrency 1-250: TTFT (ms), ITL (ms), Throughput (tokens/s); and the first row of the 500 / 2000
table. The page does not say which backend the NIM profile ran; fp8 TP2 on H100 is posed with
the TensorRT-LLM engine class (its default sizing, ``trtllm-bench build``). Llama 3.3 70B has the
architecture of Llama 3.1 70B.

What is in sample: the prefill queue (``online.py``: prompts wait behind each other's prefill,
M/D/1) was written after seeing this table's TTFT grow from 407 ms to 835 ms between concurrency
1 and 50, so TTFT up to concurrency 50 is not an out-of-sample check. Throughput and ITL come from
the step model the serving validation already checks, and no constant was set on these rows.
Measured 2026-11-24 on this code (predicted / published - 1):

| concurrency | TTFT | ITL | tokens/s |
|---|---|---|---|
| 1 | +12% | -4% | +3% |
| 5 | -5% | -11% | +12% |
| 25 | -1% | +10% | -9% |
| 50 | +7% | +8% | -7% |
| 100 | -35% | +13% | -6% |
| 150 / 200 / 250 | -2% / +2% / +4% | +13% | -6% |

At 100 the engine is at its knee: the plan runs 93 sequences at once (trtllm-bench's sizing),
the published ITL plateau implies about 85, and a queue that short is dominated by that
difference. The 500 / 2000 row at concurrency 1: TTFT 0%, ITL -7%, tokens/s +8%.
"""

from __future__ import annotations

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.workload import load_model

#: concurrency -> (TTFT ms, ITL ms, output tokens/s), 5000 in / 500 out
NIM_1_8_0_5000_500 = {
    1: (406.77, 18.58, 51.67),
    5: (546.7, 21.83, 218.48),
    25: (688.69, 38.75, 623.4),
    50: (834.51, 59.73, 814.37),
    100: (7996.25, 92.91, 917.26),
    150: (34794.22, 92.86, 920.9),
    200: (61680.22, 93.06, 920.54),
    250: (88605.32, 93.2, 920.12),
}
NIM_1_8_0_500_2000_C1 = (47.77, 18.91, 52.85)

#: Stated tolerances: throughput and ITL within 15% at every concurrency (the serving
#: validation's 12% out-of-sample MAPE, rounded up); TTFT within 15% where the queue for the
#: engine dominates it (150 and up) and within 25% below the knee, where it is the prefill
#: model's (in sample here, see the module docstring).
RATE_TOLERANCE = 0.15
QUEUED_TTFT_TOLERANCE = 0.15
TTFT_TOLERANCE = 0.25


def _plan(concurrency: int, isl: int, osl: int):  # type: ignore[no-untyped-def]
    job = InferJob(
        input_len=isl,
        output_len=osl,
        batch=None,
        tp=2,
        weight_dtype="fp8",
        kv_dtype="fp8",
        engine="tensorrt-llm",
        concurrency=concurrency,
    )
    return plan_inference(load_model("llama-3.3-70b"), hardware_from_catalog("h100-sxm"), job)


@pytest.mark.parametrize("concurrency", sorted(NIM_1_8_0_5000_500))
def test_nim_llama_3_3_70b_fp8_tp2_h100_concurrency_sweep(concurrency: int) -> None:
    ttft_ms, itl_ms, tok_s = NIM_1_8_0_5000_500[concurrency]
    plan = _plan(concurrency, 5000, 500)
    assert plan.output_tokens_per_s == pytest.approx(tok_s, rel=RATE_TOLERANCE)
    assert plan.tpot_s * 1e3 == pytest.approx(itl_ms, rel=RATE_TOLERANCE)
    if concurrency >= 150:
        assert plan.ttft_s * 1e3 == pytest.approx(ttft_ms, rel=QUEUED_TTFT_TOLERANCE)
    elif concurrency <= 50:
        assert plan.ttft_s * 1e3 == pytest.approx(ttft_ms, rel=TTFT_TOLERANCE)
    else:  # the knee: queueing starts in the plan as in the published run, within a factor 2
        load = plan.extras["online"]
        assert load["queue_wait_ms"] > 2 * load["service_ttft_ms"]
        assert 0.5 < plan.ttft_s * 1e3 / ttft_ms < 2.0


def test_nim_llama_3_3_70b_short_prompt_long_output_one_in_flight() -> None:
    ttft_ms, itl_ms, tok_s = NIM_1_8_0_500_2000_C1
    plan = _plan(1, 500, 2000)
    assert plan.ttft_s * 1e3 == pytest.approx(ttft_ms, rel=TTFT_TOLERANCE)
    assert plan.tpot_s * 1e3 == pytest.approx(itl_ms, rel=RATE_TOLERANCE)
    assert plan.output_tokens_per_s == pytest.approx(tok_s, rel=RATE_TOLERANCE)
