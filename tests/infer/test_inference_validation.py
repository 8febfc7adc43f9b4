"""Inference validation: every row posed as a command, scored out of sample, with intervals."""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flopwise.plan.infer.constants import FP8_GEMM_FRACTION
from validation_cache import inference_doc, inference_interval_doc, inference_validation

ROOT = Path(__file__).resolve().parents[2]


def _doc() -> dict[str, Any]:
    """validate_inference().to_dict(), computed once per test session (validation_cache)."""
    return inference_doc()


def test_at_least_400_rows_scored_with_both_predictions() -> None:
    doc = _doc()
    assert doc["out_of_sample"]["n"] >= 400
    assert set(doc["out_of_sample"]) == {"n", "mape_pct", "max_abs_error_pct", "bias_pct"}
    assert set(doc["in_sample"]) == {"n", "mape_pct", "max_abs_error_pct", "bias_pct"}
    fams = {g["family"] for g in doc["by_family"]}
    assert {"trtllm014", "trtllm09", "trtllm05"} <= fams
    accs = {g["accelerator"] for g in doc["by_accelerator"]}
    assert {"l40s", "a100-pcie-80gb", "h200-sxm"} <= accs
    row = doc["rows"][0]
    for key in ("id", "family", "accelerator", "metric", "measured", "predicted",
                "predicted_out_of_sample", "error_pct", "error_out_of_sample_pct", "command",
                "note"):  # fmt: skip
        assert key in row
    # a skipped row says why
    skipped = {s["id"]: s["reason"] for s in doc["skipped"]}
    assert "ShareGPT" in skipped["sglang030_offline_70b_sglang"]
    # a run past the model's context (TensorRT-LLM 0.9.0 built GPT-J for 4096 tokens) is posed
    # with --allow-long-context, not skipped
    assert "trtllm09_h100_gptj6b_bs64_tp1_2048_2048" not in skipped
    gptj = [r for r in doc["rows"] if r["id"] == "trtllm09_h100_gptj6b_bs64_tp1_2048_2048"]
    assert gptj and "--allow-long-context" in gptj[0]["command"].split()
    # ... and, as 0.9.0's trtllm-build commands ran it, with 16-bit context attention
    assert "--no-fp8-context-attention" in gptj[0]["command"].split()


def test_errors_are_reported_by_weight_precision_and_replica_size() -> None:
    doc = _doc()
    regimes = {g["regime"]: g for g in doc["by_regime"]}
    assert {"16-bit, 1 GPU", "16-bit, multi-GPU", "fp8, 1 GPU", "fp8, multi-GPU"} <= set(regimes)
    # the regimes partition the scored rows, and each one's bias is its rows' mean error
    assert sum(g["n"] for g in regimes.values()) == doc["out_of_sample"]["n"]
    multi16 = [
        r["error_out_of_sample_pct"]
        for r in doc["rows"]
        if "--weight-dtype fp16" in r["command"] or "--weight-dtype bf16" in r["command"]
        if "--gpus 1 " not in r["command"] + " "
    ]
    assert regimes["16-bit, multi-GPU"]["n"] == len(multi16)
    assert regimes["16-bit, multi-GPU"]["bias_pct"] == pytest.approx(sum(multi16) / len(multi16))


def test_static_batch_bands_bound_the_batch() -> None:
    from dataclasses import replace

    from flopwise.validate.inference import static_batch_band
    from flopwise.validate.inference_rows import PosedRow

    row = PosedRow(
        id="x", family="f", model="llama-3.1-8b", accelerator="h100-sxm", system=None,
        input_len=128, output_len=128, batch=1, tp=1, gpus=1, weight_dtype="fp8",
        kv_dtype="fp8", engine="vllm",
    )  # fmt: skip
    bands = {b: static_batch_band(replace(row, batch=b)) for b in (1, 4, 5, 32, 33, 128, 129)}
    assert bands == {
        1: "1-4",
        4: "1-4",
        5: "5-32",
        32: "5-32",
        33: "33-128",
        128: "33-128",
        129: ">128",
    }
    # an offline run of N requests and --batch max are not one static batch
    assert static_batch_band(replace(row, batch=64, num_requests=3000)) is None
    assert static_batch_band(replace(row, batch=None)) is None


def test_errors_are_reported_by_static_batch() -> None:
    doc = _doc()
    groups = doc["by_static_batch"]
    names = [g["static_batch"] for g in groups]
    # reported in batch order, every band of AMD's latency tables (batch 1-128) present
    assert names[:3] == ["1-4", "5-32", "33-128"]
    # the bands partition exactly the rows posed as one static batch (--batch N, no requests)
    static = [
        r["error_out_of_sample_pct"]
        for r in doc["rows"]
        if "--num-requests" not in r["command"] and "--batch " in r["command"]
        if "--batch max" not in r["command"]
    ]
    assert sum(g["n"] for g in groups) == len(static) > 0
    assert sum(g["bias_pct"] * g["n"] for g in groups) == pytest.approx(sum(static))


def test_out_of_sample_refits_only_what_is_fitted() -> None:
    from flopwise.plan.infer.constants import MMHA_OPS_PER_SM_CLOCK
    from flopwise.validate.inference import FITTED_CONSTANTS

    doc = _doc()
    families = {g["family"] for g in doc["by_family"]}
    fp8 = doc["fitted"]["FP8_GEMM_FRACTION"]
    assert fp8["shipped"] == FP8_GEMM_FRACTION
    assert set(fp8["fit_without_family"]) == families
    assert not fp8["fitted"] and "FP8_GEMM_FRACTION" not in FITTED_CONSTANTS
    # the one constant fitted on serving rows: shipped as fitted on all of them, refitted
    # without each family for that family's rows
    assert FITTED_CONSTANTS == ("MMHA_OPS_PER_SM_CLOCK",)
    mmha = doc["fitted"]["MMHA_OPS_PER_SM_CLOCK"]
    assert mmha["fitted"] and mmha["shipped"] == MMHA_OPS_PER_SM_CLOCK
    assert mmha["fit_on_all_rows"] == MMHA_OPS_PER_SM_CLOCK
    assert set(mmha["fit_without_family"]) == families
    fit_rows = set(mmha["fit_rows"])
    assert fit_rows and mmha["in_sample"]["n"] == mmha["out_of_sample"]["n"] == len(fit_rows)
    moved = 0
    for r in doc["rows"]:
        per_head = "--decode-kernel per-head" in r["command"]
        # fitted on what the decode kernel moves: throughput and TPOT, not first-token latency
        fitted_on = per_head and r["metric"] != "ttft_ms"
        assert fitted_on == (f"{r['id']}:{r['metric']}" in fit_rows)
        if not per_head:  # nothing else is fitted: out of sample is in sample
            assert r["predicted_out_of_sample"] == r["predicted"]
        elif mmha["fit_without_family"][r["family"]] != MMHA_OPS_PER_SM_CLOCK:
            moved += r["predicted_out_of_sample"] != r["predicted"]
    assert moved > 0  # a fold that chose another value re-predicted its family's rows
    # held out by accelerator instead: one fold per die the fit rows ran on, scored on them all
    by_acc = mmha["leave_one_accelerator_out"]
    assert set(by_acc["fit_without_accelerator"]) == {
        r["accelerator"] for r in doc["rows"] if f"{r['id']}:{r['metric']}" in fit_rows
    }
    assert by_acc["out_of_sample"]["n"] == len(fit_rows)


def test_rows_decode_with_the_kernel_their_release_had() -> None:
    """TensorRT-LLM 0.5 predates XQA; 0.9 had XQA kernels for 8 query heads per KV head only,
    so its Mistral, Mixtral, Falcon 180B and MHA rows decode with masked MHA, Llama 2 70B with
    XQA; the later perf-overview families compile XQA for every group."""
    by_id = {r["id"]: r["command"] for r in _doc()["rows"]}
    per_head = "--decode-kernel per-head"
    assert per_head in by_id["trtllm09_h100_mistral7b_bs120_tp1_128_2048"]
    assert per_head in by_id["trtllm09_h100_falcon180b_bs64_tp4_2048_2048"]
    assert per_head in by_id["trtllm09_h100_gptj6b_bs64_tp1_2048_2048"]
    assert per_head not in by_id["trtllm09_h100_llama2_70b_bs64_tp2_2048_2048"]
    assert all(per_head in c for i, c in by_id.items() if i.startswith("trtllm05_"))
    later = [c for i, c in by_id.items() if i.startswith(("trtllm014", "trtllm015", "trtllm10"))]
    assert later and not any(per_head in c for c in later)


def _sample() -> list[dict[str, Any]]:
    """Up to four rows per family, one per (accelerator, metric, tp > 1): covers static and
    `--batch max`, TTFT and throughput, NVLink and PCIe (--system) layouts."""
    picked: dict[tuple[str, str, str, bool], dict[str, Any]] = {}
    for r in _doc()["rows"]:
        key = (r["family"], r["accelerator"], r["metric"], "--tp 1 " not in r["command"])
        picked.setdefault(key, r)
    out: list[dict[str, Any]] = []
    for fam in sorted({k[0] for k in picked}):
        rows = [r for k, r in picked.items() if k[0] == fam]
        rows.sort(key=lambda r: ("--system" not in r["command"], r["metric"] != "ttft_ms"))
        out += rows[:4]
    if not any(r["model"].startswith("mixtral") for r in out):  # an MoE row too
        out.append(next(r for r in _doc()["rows"] if r["model"].startswith("mixtral")))
    return out


def test_sample_commands_reproduce_what_validate_scored() -> None:
    sample = _sample()
    assert len(sample) >= 8
    assert any("--system pcie-" in r["command"] for r in sample)
    assert {r["metric"] for r in sample} >= {"output_tokens_per_s", "ttft_ms"}
    for r in sample:
        argv = shlex.split(r["command"])
        assert argv[:3] == ["flopwise", "plan", "infer"]
        proc = subprocess.run(
            [sys.executable, "-m", "flopwise", *argv[1:], "--json"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        plan = json.loads(proc.stdout)
        assert plan[r["metric"]] == pytest.approx(r["predicted"], rel=1e-9), r["id"]


def test_intervals_shipped_match_the_residuals(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the script's own --check, run in-process on the session's interval_doc() (the same
    # planning validate does; a subprocess would plan every row again)
    spec = importlib.util.spec_from_file_location(
        "fit_intervals_script", ROOT / "scripts" / "fit_intervals.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    doc = inference_interval_doc()
    monkeypatch.setattr("flopwise.validate.intervals_fit.interval_doc", lambda: doc)
    code = script.main(["--only", "inference", "--check"])
    out, err = capsys.readouterr()
    assert code == 0, out + err


def test_interval_coverage_is_reported_out_of_sample() -> None:
    cov = _doc()["interval_coverage_pct"]
    assert cov is not None and 0.0 < cov <= 100.0


def test_validate_cli_prints_out_of_sample_and_in_sample(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `flopwise validate --only inference` in-process on the session's validate_inference()
    # (a real subprocess of `flopwise validate --json` is tests/goodput/test_goodput_cli.py's)
    from flopwise.cli.main import main

    report = inference_validation()
    monkeypatch.setattr(
        "flopwise.validate.inference.validate_inference", lambda with_intervals=True: report
    )
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr("flopwise.present.console._console", None)  # a console 200 wide
    code = main(["validate", "--only", "inference"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "out of sample" in out and "in-sample" in out
    assert "trtllm014" in out and "l40s" in out
    # the measured kernel shares are named beside the fits, as measured
    assert (
        "power cap's measured share (gh100 GEMMs 0.788, attention 0.971; not fitted)"
        in " ".join(out.split())
    )


def test_measured_shares_are_reported_with_their_source() -> None:
    from flopwise.plan.sustained import POWER_CAPPED_SHARE

    measured = _doc()["measured"]["POWER_CAPPED_SHARE"]
    assert set(measured) == set(POWER_CAPPED_SHARE)
    for die, shares in POWER_CAPPED_SHARE.items():
        assert {k: measured[die][k] for k in shares} == shares
        assert "sustained.txt" in measured[die]["source"]
