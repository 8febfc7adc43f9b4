"""Online serving against an unseen, fully stated concurrency sweep: SemiAnalysis InferenceX.

Source: InferenceX's public benchmark API, as captured in ``SemiAnalysisAI/InferenceX-app``'s
Cypress fixture (fork ``vngcloud/InferenceX-app``, ``packages/app/cypress/fixtures/api/
benchmarks.json`` at commit 528c4146, 2026-06-14); recipes in ``SemiAnalysisAI/InferenceX``
(``.github/configs/nvidia-master.yaml`` ``dsr1-fp8-h200-sglang``; ``benchmarks/single_node/
dsr1_fp8_h200.sh`` at 12ba0ae / aa2df95). DeepSeek-R1-0528 (the DeepSeek-V3 architecture) FP8
on 8 x H200, SGLang v0.5.9 / v0.5.12, TP8, no speculative decoding: ``--mem-fraction-static
0.82 --chunked-prefill-size 32768 --max-running-requests 512`` (1k/1k; 256 otherwise), KV cache at
SGLang's default (16-bit). Client: ``benchmark_serving.py --dataset-name random
--random-range-ratio 0.8 --max-concurrency C --num-prompts 10C --request-rate inf
--ignore-eos``: each request's input and output lengths are uniform on [0.8 L, L], posed here at
their mean 0.9 L. Scored: mean TPOT and output tokens/s (output_tput_per_gpu x 8).

No serving constant was set on these rows; they were read after the online mode existed. One
change was made after reading them, a physical one: a prompt joins the running batch in whole
passes of the engine's token budget instead of an even slice in every step (``online.
steady_service``; in an MoE a pass reads the experts its tokens route to once, so slicing every
prompt over every step charged most experts on every step). Before it: TPOT MAPE 31.8% (8k/1k
+102…+105%), tokens/s 17.1%; after: 4.7% and 6.4%. Since that change was made with these rows in
view, ``flopwise validate --only online`` counts these 18 figures in sample. Measured 2026-11-24 on this code
(predicted / published - 1):

| ISL / OSL | concurrency | TPOT | tokens/s |
|---|---|---|---|
| 1k / 1k | 4, 8 | -8%, -2% | +13%, +5% |
| 1k / 8k | 4, 8, 16, 32, 64 | -12%, -4%, +3%, +4%, +3% | +15%, +7%, 0%, -2%, 0% |
| 8k / 1k | 4, 8 | -7%, 0% | +11%, +3% |

Reported and not asserted:
- TTFT: the plan gives 52-69 ms for the 1k prompts against a published mean of 158-420 ms (median
  85-183 ms): SGLang's per-request path and DeepSeek's prefill kernels cost more than the plan's
  prefill, and the means carry the first requests of each run. ``validate --only online`` poses
  these rows as the benchmark's run from a cold start (``--num-requests 10C --output-spread
  0.111``, tests/infer/test_closed_loop_run.py), whose means carry that first burst: 53-153 ms.
- The same recipe on 8 x MI300X (SGLang ROCm images, AITER attention, FP8 KV; 15 rows): the plan
  is +42…+194% fast in tokens/s (its TPOT 27-65% below the published; the 1k/8k rows ran SGLang
  v0.5.9 and are the furthest). The MI300X rows the serving validation scores are vLLM with dense
  Llama models; nothing there prices AITER's MLA and MoE kernels, and the same deployment's
  published throughput moves by +-25% between vLLM releases on that device.
"""

from __future__ import annotations

import statistics

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.validate.online import load_online_runs
from flopwise.workload import load_model


def _h200_rows() -> dict[tuple[int, int, int], tuple[float, float]]:
    """(ISL, OSL, concurrency) -> (mean TPOT s, output tokens/s per GPU) of the 8 x H200 SGLang
    rows in catalog/data/published/online_runs.csv."""
    rows = {r["id"]: float(r["measured"]) for r in load_online_runs()}
    out = {}
    for isl, osl, conc in (
        (1024, 1024, 4), (1024, 1024, 8), (1024, 8192, 4), (1024, 8192, 8), (1024, 8192, 16),
        (1024, 8192, 32), (1024, 8192, 64), (8192, 1024, 4), (8192, 1024, 8),
    ):  # fmt: skip
        key = f"inferencex_dsr1_fp8_h200_sglang_{isl}_{osl}_c{conc}"
        out[(isl, osl, conc)] = (
            rows[f"{key}_tpot_ms"] / 1e3,
            rows[f"{key}_output_tokens_per_s"] / 8,
        )
    return out


H200_SGLANG = _h200_rows()

#: Stated tolerances: each row within 20% (the width of the serving validation's 80% interval,
#: about 0.8-1.1 x), the set within the issue's 10% serving target.
ROW_TOLERANCE = 0.20
SET_MAPE = 0.10


def _plan(isl: int, osl: int, concurrency: int):  # type: ignore[no-untyped-def]
    job = InferJob(
        input_len=round(0.9 * isl),
        output_len=round(0.9 * osl),
        batch=512 if (isl, osl) == (1024, 1024) else 256,  # --max-running-requests
        tp=8,
        weight_dtype="fp8",
        kv_dtype="bf16",
        engine="sglang",
        concurrency=concurrency,
        memory_fraction=0.82,
        engine_max_tokens=32768,
    )
    return plan_inference(load_model("deepseek-v3"), hardware_from_catalog("h200-sxm"), job)


def _errors() -> list[tuple[float, float]]:
    out = []
    for (isl, osl, c), (tpot_s, tok_per_gpu) in H200_SGLANG.items():
        plan = _plan(isl, osl, c)
        out.append((plan.tpot_s / tpot_s - 1, plan.output_tokens_per_s / (8 * tok_per_gpu) - 1))
    return out


def test_deepseek_r1_fp8_on_eight_h200_with_sglang_each_row() -> None:
    for tpot_err, tok_err in _errors():
        assert abs(tpot_err) < ROW_TOLERANCE
        assert abs(tok_err) < ROW_TOLERANCE


def test_deepseek_r1_fp8_on_eight_h200_with_sglang_as_a_set() -> None:
    errors = _errors()
    assert statistics.fmean(abs(t) for t, _ in errors) < SET_MAPE
    assert statistics.fmean(abs(k) for _, k in errors) < SET_MAPE


@pytest.mark.parametrize("concurrency", [4, 64])
def test_the_running_batch_is_the_concurrency_below_capacity(concurrency: int) -> None:
    plan = _plan(1024, 8192, concurrency)
    load = plan.extras["online"]
    assert load["running"] == concurrency and load["queue_wait_ms"] == 0
