"""Validate the inference planner against published serving runs with fixed batch and lengths.

Only rows whose batch size, input and output lengths are published are compared, and each is
compared like with like: ``measured_output_tokens_per_s`` is the whole configuration's output
tokens/s (published per-GPU x TP, see published/NOTES.md), ``measured_ttft_ms`` the time to first
token at the published batch. The planner runs with the engine-class constants of
``flopwise.plan.infer.constants``; nothing is tuned per row. Rows with variable (ShareGPT) or
unstated lengths are listed as skipped with the reason.

Run standalone: ``python -m flopwise.validate.inference [--json]``.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

from flopwise.errors import FlopwiseError
from flopwise.validate.common import SkippedRow, ValidationReport, ValidationRow

#: Accelerator names used by the published file -> catalog ids.
_ACCELERATORS: Mapping[str, str] = MappingProxyType(
    {
        "H100-SXM-80GB": "h100-sxm",
        "A100-SXM-80GB": "a100-sxm-80gb",
        "H200-SXM-141GB": "h200-sxm",
        "H100-80GB": "h100-sxm",
        "A100-80GB": "a100-sxm-80gb",
    }
)

#: Model labels -> catalog ids (NOTES.md: "LLaMA 7B/70B" in the TensorRT-LLM doc are Llama-2).
_MODELS: tuple[tuple[str, str], ...] = (
    ("llama-2 7b", "llama-2-7b"),
    ("llama-2 13b", "llama-2-13b"),
    ("llama-2 70b", "llama-2-70b"),
)


@dataclass(frozen=True, slots=True)
class _Precision:
    weight: str
    kv: str
    note: str


def _precision(label: str) -> _Precision | None:
    text = label.strip().lower()
    if text.startswith("fp8 (weights+kv)"):
        return _Precision("fp8", "fp8", "")
    if text == "fp8":
        return _Precision(
            "fp8",
            "fp8",
            "'FP8' read as fp8 weights, activations and KV cache, as in the "
            "TensorRT-LLM performance docs of the same period",
        )
    if text in ("fp16", "bf16"):
        return _Precision(text, text, "")
    return None


def _engine(label: str) -> str | None:
    text = label.lower()
    if "tensorrt-llm" in text:
        return "tensorrt-llm"
    if "sglang" in text:
        return "sglang"
    if "vllm" in text:
        return "vllm"
    return None


def _model(label: str) -> str | None:
    text = label.lower()
    for key, model_id in _MODELS:
        if key in text:
            return model_id
    return None


def _int(text: str) -> int | None:
    try:
        return int(float(text)) if text.strip() else None
    except ValueError:
        return None


def load_rows() -> list[dict[str, str]]:
    data = resources.files("flopwise.catalog").joinpath("data/published/inference_runs.csv")
    with data.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def validate_inference() -> ValidationReport:
    """Compare plan_inference with every published row that fixes batch and lengths."""
    from flopwise.hardware import hardware_from_catalog
    from flopwise.plan.infer import InferJob, plan_inference
    from flopwise.workload.hf import load_model

    rows: list[ValidationRow] = []
    skipped: list[SkippedRow] = []
    for r in load_rows():
        rid = r["id"]
        batch, isl, osl = _int(r["batch_size"]), _int(r["input_len"]), _int(r["output_len"])
        if batch is None or isl is None or osl is None:
            reason = (
                "ShareGPT prompts: input/output lengths vary per request and requests arrive "
                "at a rate, so there is no fixed batch"
                if rid.startswith("sglang")
                else "input/output lengths and batch size are not published"
            )
            skipped.append(SkippedRow(rid, reason))
            continue
        prec = _precision(r["dtype"])
        engine = _engine(r["engine"])
        model_id = _model(r["model"])
        acc = _ACCELERATORS.get(r["accelerator"])
        if prec is None or engine is None or model_id is None or acc is None:
            skipped.append(SkippedRow(rid, "model, dtype, engine or accelerator not mapped"))
            continue
        tp = _int(r["tp"]) or 1
        replicas = max(1, (_int(r["num_gpus"]) or tp) // tp)
        job = InferJob(
            input_len=isl,
            output_len=osl,
            batch=batch,
            tp=tp,
            replicas=replicas,
            weight_dtype=prec.weight,
            kv_dtype=prec.kv,
            engine=engine,
        )
        try:
            plan = plan_inference(load_model(model_id), hardware_from_catalog(acc), job)
        except FlopwiseError as exc:
            skipped.append(SkippedRow(rid, f"planner refused: {exc}"))
            continue
        note = prec.note
        if plan.fits is False:
            note = (note + "; " if note else "") + "planner says this batch does not fit"
        if r["measured_output_tokens_per_s"].strip():
            measured = float(r["measured_output_tokens_per_s"])
            rows.append(
                ValidationRow(rid, "output_tokens_per_s", measured, plan.output_tokens_per_s, note)
            )
        if r["measured_ttft_ms"].strip():
            measured = float(r["measured_ttft_ms"])
            rows.append(ValidationRow(rid, "ttft_ms", measured, plan.ttft_s * 1e3, note))
        if r["measured_tpot_ms"].strip():
            measured = float(r["measured_tpot_ms"])
            rows.append(ValidationRow(rid, "tpot_ms", measured, plan.tpot_s * 1e3, note))
    return ValidationReport(rows=tuple(rows), skipped=tuple(skipped))
