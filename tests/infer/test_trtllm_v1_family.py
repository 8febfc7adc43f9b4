"""TensorRT-LLM 1.0's perf-overview as a validation family (`trtllm10`): how its rows are posed
and that validate scores them apart as unseen (validate/inference_rows.py UNSEEN_FAMILIES)."""

from __future__ import annotations

import csv
from importlib import resources

from flopwise.validate.inference_rows import UNSEEN_FAMILIES, posed_rows


def _family() -> dict[str, object]:
    posed, unposed = posed_rows()
    assert not [u for u in unposed if u.family == "trtllm10"]
    return {r.id: r for r in posed if r.family == "trtllm10"}


def test_every_transcribed_cell_is_posed() -> None:
    data = resources.files("flopwise.catalog").joinpath("data/published/inference_runs.csv")
    with data.open(encoding="utf-8") as fh:
        ids = [r["id"] for r in csv.DictReader(fh) if r["id"].startswith("trtllm10_")]
    # the v1.0 tables: 210 B200/GB200/H200/H100 cells and 118 RTX PRO 6000 cells
    assert len(ids) == 328 == len(_family())
    assert "trtllm10" in UNSEEN_FAMILIES


def test_rows_are_posed_as_the_document_ran_them() -> None:
    rows = _family()
    # NVFP4 checkpoint on one B200: FP4 weights and activations, FP8 KV cache
    r = rows["trtllm10_llama3370b_b200fp4_tp1_2048_2048"]
    assert (r.accelerator, r.weight_dtype, r.kv_dtype, r.tp, r.pp) == ("b200", "fp4", "fp8", 1, 1)  # type: ignore[attr-defined]
    assert r.num_requests == 1500 and r.measured["output_tokens_per_s"] == 4783  # type: ignore[attr-defined]
    assert r.memory_fraction == 0.95  # type: ignore[attr-defined]
    # the RTX PRO 6000 tables' TPxPP layouts, inside the 8-GPU RTX PRO Server
    r = rows["trtllm10_llama3370b_rtxfp4_tp1_pp8_128_2048"]
    assert (r.tp, r.pp, r.gpus, r.system) == (1, 8, 8, "rtx-pro-server")  # type: ignore[attr-defined]
    assert "--pp 8" in r.command  # type: ignore[attr-defined]
    # MoE over several GPUs: expert parallelism over the TP group with attention DP
    r = rows["trtllm10_qwen3235ba22b_h200fp8_tp8_1000_1000"]
    assert (r.ep, r.attention_dp) == (8, True)  # type: ignore[attr-defined]
    assert "--ep 8 --attention-dp" in r.command  # type: ignore[attr-defined]
    # ... and on one GPU neither
    r = rows["trtllm10_qwen330ba3b_b200fp4_tp1_128_128"]
    assert (r.ep, r.attention_dp) == (1, False)  # type: ignore[attr-defined]


def test_rows_a_modelling_choice_saw_are_marked() -> None:
    rows = _family().values()
    in_view = [r for r in rows if r.in_view]  # type: ignore[attr-defined]
    # the pipeline micro-batch slots were modelled after the RTX PRO 6000 PP rows, the FP4
    # GEMM ceiling after the B200/GB200 NVFP4 rows, the whole dense part under attention DP
    # after the H100 Llama 4 Maverick rows, TensorRT-LLM's context-only chunked attention after
    # the H200 Llama 4 rows at 20,000/2,000: exactly those, nothing else
    saw = [
        r
        for r in rows
        if r.pp > 1  # type: ignore[attr-defined]
        or r.accelerator in ("b200", "gb200")  # type: ignore[attr-defined]
        or (r.model, r.accelerator) == ("llama-4-maverick", "h100-sxm")  # type: ignore[attr-defined]
        or (
            r.model.startswith("llama-4")  # type: ignore[attr-defined]
            and r.accelerator == "h200-sxm"  # type: ignore[attr-defined]
            and r.input_len == 20000  # type: ignore[attr-defined]
        )
    ]
    assert len(in_view) == 69 + 98 + 7 + 2
    assert {r.id for r in in_view} == {r.id for r in saw}  # type: ignore[attr-defined]
