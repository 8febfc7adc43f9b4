"""`flopwise bench sustained` on the CPU (tiny GEMMs, short runs) and its measured share in a
serving plan (`--measured`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from flopwise.bench.sustained import (
    SustainedConfig,
    Window,
    run_sustained,
    steady_state_tflops,
)
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_for, hardware_from_catalog
from flopwise.plan.infer import InferJob, plan_inference
from flopwise.plan.infer.constants import get_engine
from flopwise.plan.infer.latency import make_rates
from flopwise.plan.roofline import achievable_matmul_tflops
from flopwise.plan.sustained import POWER_CAPPED_SHARE, serving_compute_share
from flopwise.results.store import ResultStore
from flopwise.workload.hf import load_model


def test_a_cpu_run_records_windows_and_the_share_of_its_burst_rate() -> None:
    run = run_sustained(SustainedConfig(device="cpu", size=128, seconds=0.4, window_s=0.1))
    assert run.status == "complete" and run.dtype == "fp32"
    assert len(run.windows) >= 2 and all(w.tflops > 0 and w.calls >= 1 for w in run.windows)
    assert [w.t_s for w in run.windows] == sorted(w.t_s for w in run.windows)
    assert run.burst_tflops is not None and run.burst_tflops > 0
    tail = run.windows[len(run.windows) // 2 :]
    assert run.sustained_tflops == pytest.approx(sum(w.tflops for w in tail) / len(tail))
    assert run.gemm_share == pytest.approx(run.sustained_tflops / run.burst_tflops)
    s = run.summary()
    assert s["gemm_share"] == run.gemm_share and s["size"] == 128
    # no clocks or power on a CPU: unknown, never invented
    assert all(w.sm_clock_mhz is None and w.power_w is None for w in run.windows)


def test_the_steady_state_is_the_second_half() -> None:
    windows = tuple(Window(float(i), rate, 1, None, None) for i, rate in enumerate((9, 8, 6, 6)))
    assert steady_state_tflops(windows) == 6.0
    assert steady_state_tflops(windows[:1]) == 9.0
    assert steady_state_tflops(()) is None


def test_ctrl_c_keeps_the_windows_measured() -> None:
    def stop(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    run = run_sustained(SustainedConfig(device="cpu", size=64, seconds=5.0, window_s=0.05), stop)
    assert run.status == "interrupted"
    assert len(run.windows) == 2 and run.gemm_share is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dtype": "int8"}, "valid: bf16, fp16, fp32"),
        ({"size": 8}, "at least 64"),
        ({"seconds": 0.0}, "positive"),
        ({"seconds": 1.0, "window_s": 0.8}, "fewer than two windows"),
    ],
)
def test_bad_config_is_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(FlopwiseError, match=message):
        SustainedConfig(**kwargs)  # type: ignore[arg-type]


def test_cli_stores_the_run(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    r = run_cli(
        "bench", "sustained", "--device", "cpu", "--size", "128", "--seconds", "0.4",
        "--window", "0.1", "--json", "--db", str(db),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "complete" and doc["gemm_share"] > 0 and doc["windows"]
    shown = run_cli("results", "show", str(doc["result_id"]), "--db", str(db))
    assert shown.returncode == 0 and "gemm_share" in shown.stdout


def _store_share(db: Path, accelerator: str, share: float) -> None:
    summary = {"dtype": "bf16", "size": 8192, "seconds": 30.0, "burst_tflops": 900.0,
               "sustained_tflops": 900.0 * share, "gemm_share": share, "status": "complete"}  # fmt: skip
    ResultStore(str(db)).add("sustained", summary, {"windows": []}, accelerator=accelerator)


def test_measured_share_prices_serving_gemms(tmp_path: Path) -> None:
    """Measurement feeds the plan: a B200's own share replaces its training fraction, and an
    H100's replaces the die's catalog share."""
    db = tmp_path / "r.sqlite"
    _store_share(db, "b200", 0.84)
    _store_share(db, "h100-sxm", 0.70)
    trt = get_engine("tensorrt-llm")
    for accelerator, share in (("b200", 0.84), ("h100-sxm", 0.70)):
        hw = hardware_for(accelerator, None, "latest", str(db))
        assert hw.power_capped_gemm_share == share
        assert hw.origins["power_capped_gemm_share"].kind == "measured"
        assert serving_compute_share(hw, "gemm") == (share, "measured")
        rates = make_rates(hw, trt, "bf16", "bf16")
        assert rates.gemm_flops_s == pytest.approx(
            achievable_matmul_tflops(hw, "bf16") * 1e12 * share
        )
    # attention keeps the die's measured share: the run timed a GEMM only
    h100 = hardware_for("h100-sxm", None, "latest", str(db))
    assert serving_compute_share(h100, "attention")[0] == POWER_CAPPED_SHARE["gh100"]["attention"]
    job = InferJob(input_len=2048, output_len=64, batch=8, engine="tensorrt-llm")
    plan = plan_inference(load_model("llama-3.1-8b"), h100, job)
    assert any("bench sustained" in a for a in plan.assumptions)
    slower = plan_inference(load_model("llama-3.1-8b"), hardware_from_catalog("h100-sxm"), job)
    assert plan.ttft_s > slower.ttft_s  # 0.70 measured < the die's 0.788


def test_an_implausible_share_is_not_applied(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    _store_share(db, "b200", 0.0)
    _store_share(db, "h100-sxm", 2.5)
    for accelerator in ("b200", "h100-sxm"):
        # nothing usable was measured on either: said so, not a share of 0 or 2.5 applied
        with pytest.raises(FlopwiseError, match="no stored measurements"):
            hardware_for(accelerator, None, "latest", str(db))
