"""80% prediction intervals on plan infer: regimes, JSON keys, text view, generic loader."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.intervals import Interval, interval_for, load_interval_file
from flopwise.workload import load_model


def test_interval_factors_and_inverse() -> None:
    iv = Interval(0.8, 1.25, "r", 10, "s")
    assert iv.around(100.0) == (80.0, 125.0)
    inv = iv.inverse()
    assert (inv.lo, inv.hi) == (pytest.approx(0.8), pytest.approx(1.25))
    with pytest.raises(FlopwiseError):
        Interval(1.2, 1.1, "r", 1, "s")


def test_shipped_file_has_every_regime_of_the_published_rows() -> None:
    doc = load_interval_file("inference")
    assert doc["coverage"] == 0.8
    assert "h100-sxm" in doc["validated_accelerators"]
    for validated in ("validated", "unvalidated"):
        for engine in ("named", "generic"):
            regime = f"{validated}-accelerator/{engine}-engine/dense"
            iv = interval_for("inference", regime, "output_tokens_per_s")
            assert iv is not None and iv.n >= 8 and iv.lo < 1.0 < iv.hi
    assert interval_for("inference", "no-such-regime", "ttft_ms") is None
    assert load_interval_file("no-such-kind") == {}


def test_plan_carries_intervals_around_its_predictions() -> None:
    job = InferJob(input_len=1024, output_len=256, batch=8, engine="tensorrt-llm")
    plan = plan_inference(load_model("llama-3.1-8b"), hardware_from_catalog("h100-sxm"), job)
    doc = plan.to_dict()
    for metric in ("ttft_ms", "tpot_ms", "output_tokens_per_s"):
        lo, hi = doc[f"{metric}_interval"]
        assert lo < hi
        assert doc["intervals"][metric]["regime"] == "validated-accelerator/named-engine/dense"
    assert not any("assumed: no published serving" in a for a in doc["assumptions"])


def test_unvalidated_accelerator_is_labelled_and_uses_its_regime() -> None:
    job = InferJob(input_len=1024, output_len=256, batch=8, tp=2)
    # MI325X: no published serving run in the validation (MI300X has AMD's vLLM tables)
    plan = plan_inference(load_model("mixtral-8x7b"), hardware_from_catalog("mi325x"), job)
    doc = plan.to_dict()
    assert doc["intervals"]["output_tokens_per_s"]["regime"].startswith("unvalidated")
    assert any(
        "assumed: no published serving runs validate mi325x" in a for a in doc["assumptions"]
    )
    validated = plan_inference(load_model("mixtral-8x7b"), hardware_from_catalog("mi300x"), job)
    regime = validated.to_dict()["intervals"]["output_tokens_per_s"]["regime"]
    assert regime.startswith("validated-accelerator")


def test_cli_json_and_text_show_the_range() -> None:
    base = [sys.executable, "-m", "flopwise", "plan", "infer", "llama-3.1-8b", "-a", "h100-sxm"]
    out = subprocess.run([*base, "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert len(doc["ttft_ms_interval"]) == 2
    text = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert "–" in text.stdout and "ms (" in text.stdout


def test_a_weight_dtype_no_published_row_scores_is_labelled_assumed() -> None:
    # the serving validation scores 16-bit, FP8 and NVFP4 weights (TensorRT-LLM 1.0's B200/GB200
    # tables); an int4 weight-only plan says its precision is modelled, not validated, and a
    # bf16 plan (same kernels as the scored fp16) does not
    from flopwise.plan.infer.uncertainty import validation_assumptions

    int4 = validation_assumptions("h200-sxm", "int4")
    assert len(int4) == 1 and "int4 weights" in int4[0] and "16-bit, fp4, fp8" in int4[0]
    assert validation_assumptions("h200-sxm", "bf16") == ()
    assert validation_assumptions("h200-sxm", "fp8") == ()
    assert validation_assumptions("b200", "fp4") == ()
    both = validation_assumptions("b300", "int4")
    assert len(both) == 2 and "validate b300" in both[0]


def test_an_engine_or_model_class_no_row_scores_on_the_accelerator_is_labelled_assumed() -> None:
    # scored: TensorRT-LLM (dense and Mixtral) on NVIDIA parts, vLLM with dense Llama on MI300X
    from flopwise.plan.infer.uncertainty import validation_assumptions

    assert validation_assumptions("h100-sxm", "fp8", "tensorrt-llm", moe=True) == ()
    assert validation_assumptions("mi300x", "fp8", "vllm", moe=False) == ()
    assert validation_assumptions("h100-sxm", "fp8", "generic", moe=True) == ()
    vllm_h100 = validation_assumptions("h100-sxm", "fp8", "vllm", moe=False)
    assert (
        len(vllm_h100) == 1
        and "no published vllm run of a dense model on h100-sxm" in (vllm_h100[0])
    )
    assert "scored there: tensorrt-llm dense, tensorrt-llm moe" in vllm_h100[0]
    moe_mi300x = validation_assumptions("mi300x", "fp8", "sglang", moe=True)
    assert len(moe_mi300x) == 1 and "mixture-of-experts" in moe_mi300x[0]
    # an accelerator no row validates says that once, not per engine
    assert len(validation_assumptions("b200", "fp8", "sglang", moe=True)) == 1


def test_a_scored_deployment_prints_how_its_published_runs_compared() -> None:
    # a record, not a correction: the plan keeps its prediction and says how the published runs
    # of the same accelerator/engine/model class/weight class compared with plans like it
    from flopwise.plan.infer.uncertainty import deployment_record
    from flopwise.plan.intervals import load_interval_file

    records = load_interval_file("inference")["deployment_records"]
    line = deployment_record("h100-sxm", "tensorrt-llm", False, "fp8")
    rec = records["h100-sxm/tensorrt-llm/dense/fp8"]
    assert line is not None and f"{int(rec['n'])} scored" in line
    assert f"median {rec['median']:.2f}" in line
    assert rec["lo"] <= rec["median"] <= rec["hi"] and rec["n"] >= 8
    # bf16 and fp16 weights share the 16-bit record; a deployment nobody scored has none
    assert deployment_record("a100-sxm-80gb", "tensorrt-llm", False, "bf16") == deployment_record(
        "a100-sxm-80gb", "tensorrt-llm", False, "fp16"
    )
    assert deployment_record("h100-sxm", "vllm", False, "fp8") is None
    assert deployment_record("b300", "tensorrt-llm", False, "fp4") is None


def test_the_plan_carries_its_deployment_record() -> None:
    r = run_cli(
        "plan", "infer", "llama-3.1-70b", "-a", "b200", "--weight-dtype", "fp4",
        "--kv-dtype", "fp8", "--num-requests", "1500", "--input-len", "2048",
        "--output-len", "2048", "--engine", "tensorrt-llm-pytorch", "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = [a for a in json.loads(r.stdout)["assumptions"] if "published runs of this" in a]
    # the B200 tables ran TensorRT-LLM 1.0's PyTorch backend: their record is under its class
    assert len(lines) == 1 and "b200/tensorrt-llm-pytorch/dense/fp4" in lines[0]
