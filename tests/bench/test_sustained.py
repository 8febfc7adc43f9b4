"""`flopwise bench sustained` on the CPU (tiny GEMMs, short runs) and its measured share in
serving and training plans (`--measured`)."""

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
from flopwise.plan.sustained import (
    FRACTION_FITTED_ON_UNSEEN,
    POWER_CAPPED_SHARE,
    SUSTAINED_COMPUTE_FRACTION,
    power_clock_share,
    serving_compute_share,
    training_only_share,
)
from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training
from flopwise.plan.train.context import ModelContext
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


def _store_share(db: Path, accelerator: str, share: float, dtype: str = "bf16") -> None:
    summary = {"dtype": dtype, "size": 8192, "seconds": 30.0, "burst_tflops": 900.0,
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


def test_measured_share_prices_training_steps(tmp_path: Path) -> None:
    """Measurement feeds the training plan too. An H100's share scales GH100's fitted fraction
    by its ratio to the die's measured share (the die's own share changes nothing); a B200, whose
    die has no fitted fraction, takes its share times the training-only share measured on GH100;
    an A100, fitted but with no sustained-load measurement of its die, keeps its fit and says so."""
    db = tmp_path / "t.sqlite"
    for accelerator, share in (("h100-sxm", 0.70), ("b200", 0.84), ("a100-sxm-80gb", 0.95)):
        _store_share(db, accelerator, share)
    model = load_model("llama-3.1-8b")
    job = TrainJob(gpus=8, seq_len=4096, global_batch_seqs=64, dtype="bf16")
    gh100, die_share = SUSTAINED_COMPUTE_FRACTION["gh100"], POWER_CAPPED_SHARE["gh100"]["gemm"]

    h100 = hardware_for("h100-sxm", None, "latest", str(db))
    ctx = ModelContext(model, h100, job)
    assert ctx.compute_fraction == pytest.approx(gh100 * 0.70 / die_share)
    assert ctx.fraction_note is not None and "0.700" in ctx.fraction_note
    plain = ModelContext(model, hardware_from_catalog("h100-sxm"), job)
    assert plain.compute_fraction == pytest.approx(gh100) and plain.fraction_note is None
    same = hardware_from_catalog("h100-sxm").with_measurements(
        power_capped_gemm_share=(die_share, "test")
    )
    assert ModelContext(model, same, job).compute_fraction == pytest.approx(gh100)

    # a part capped below its die's power: the measurement replaces the clock assumption
    capped = hardware_from_catalog("h100-hbm2e-96gb")
    assert power_clock_share(capped) < 1.0
    measured = capped.with_measurements(power_capped_gemm_share=(0.70, "test"))
    assert ModelContext(model, measured, job).compute_fraction == pytest.approx(
        gh100 * 0.70 / die_share
    )

    b200 = hardware_for("b200", None, "latest", str(db))
    ctx_b = ModelContext(model, b200, job)
    assert ctx_b.compute_fraction == pytest.approx(0.84 * training_only_share())
    assert training_only_share() == pytest.approx(gh100 / die_share)

    a100 = hardware_for("a100-sxm-80gb", None, "latest", str(db))
    ctx_a = ModelContext(model, a100, job)
    assert ctx_a.compute_fraction == pytest.approx(SUSTAINED_COMPUTE_FRACTION["ga100"])
    assert ctx_a.fraction_note is not None and "kept" in ctx_a.fraction_note

    # a die fitted on one unseen run (CDNA3) keeps that fit: it holds more than the power cap
    mi300x = hardware_from_catalog("mi300x").with_measurements(power_capped_gemm_share=(0.9, "t"))
    ctx_m = ModelContext(model, mi300x, job)
    assert ctx_m.compute_fraction == pytest.approx(FRACTION_FITTED_ON_UNSEEN["cdna3"])
    assert ctx_m.fraction_note is not None and "kept" in ctx_m.fraction_note

    # validation's refit (an explicit fraction) is never moved by a stored measurement
    refit = TrainJob(gpus=8, seq_len=4096, global_batch_seqs=64, dtype="bf16",
                     sustained_compute_fraction=0.5)  # fmt: skip
    assert ModelContext(model, h100, refit).compute_fraction == pytest.approx(0.5)

    # the plan: slower than on the die's share, and it says how the share entered it
    slow = plan_training(model, h100, job, LayoutConstraints(tp=1, pp=1))
    base = plan_training(
        model, hardware_from_catalog("h100-sxm"), job, LayoutConstraints(tp=1, pp=1)
    )
    assert slow.step_time_s > base.step_time_s
    doc = slow.to_dict()
    assert "0.788" in doc["measured"]["power_capped_gemm_share"]["training"]
    b_doc = plan_training(model, b200, job, LayoutConstraints(tp=1, pp=1)).to_dict()
    assert "training-only share" in b_doc["assumed"]["sustained_compute_fraction"]["source"]


def test_an_fp8_run_times_scaled_gemms_on_the_cpu() -> None:
    """torch._scaled_mm runs on this CPU build: the FP8 path is measured here, not assumed."""
    run = run_sustained(SustainedConfig(device="cpu", dtype="fp8", size=128, seconds=0.3,
                                        window_s=0.1))  # fmt: skip
    assert run.status == "complete" and run.dtype == "fp8"
    assert run.burst_tflops is not None and run.burst_tflops > 0 and len(run.windows) >= 2
    assert run.gemm_share == pytest.approx(run.sustained_tflops / run.burst_tflops)


def test_fp8_and_16_bit_shares_price_their_own_gemms(tmp_path: Path) -> None:
    """An FP8 run prices FP8 GEMMs and a 16-bit run the rest, in serving and in training; with
    only a 16-bit run stored, FP8 GEMMs take it (one power cap, no second guess)."""
    db = tmp_path / "f.sqlite"
    _store_share(db, "h100-sxm", 0.75)
    _store_share(db, "h100-sxm", 0.90, dtype="fp8")
    hw = hardware_for("h100-sxm", None, "latest", str(db))
    assert (hw.power_capped_gemm_share, hw.power_capped_gemm_share_fp8) == (0.75, 0.90)
    assert hw.origins["power_capped_gemm_share_fp8"].kind == "measured"
    assert serving_compute_share(hw, "gemm", "fp8") == (0.90, "measured")
    assert serving_compute_share(hw, "gemm", "bf16") == (0.75, "measured")
    trt = get_engine("tensorrt-llm")
    rates = make_rates(hw, trt, "fp8", "fp8")
    assert rates.compute_share == 0.90

    model = load_model("llama-3.1-8b")
    gh100, die_share = SUSTAINED_COMPUTE_FRACTION["gh100"], POWER_CAPPED_SHARE["gh100"]["gemm"]
    fp8 = ModelContext(model, hw, TrainJob(gpus=8, seq_len=4096, global_batch_seqs=64, dtype="fp8"))
    assert fp8.gemm_fraction == pytest.approx(gh100 * 0.90 / die_share)
    assert fp8.compute_fraction == pytest.approx(gh100 * 0.75 / die_share)  # attention, logits
    assert fp8.fraction_note is not None and "fp8 GEMMs" in fp8.fraction_note
    bf16 = ModelContext(model, hw, TrainJob(gpus=8, seq_len=4096, global_batch_seqs=64))
    assert bf16.gemm_fraction == bf16.compute_fraction == pytest.approx(gh100 * 0.75 / die_share)

    only16 = tmp_path / "g.sqlite"
    _store_share(only16, "h100-sxm", 0.75)
    hw16 = hardware_for("h100-sxm", None, "latest", str(only16))
    assert hw16.power_capped_gemm_share_fp8 is None
    assert serving_compute_share(hw16, "gemm", "fp8") == (0.75, "measured")
    job = TrainJob(gpus=8, seq_len=4096, global_batch_seqs=64, dtype="fp8")
    ctx16 = ModelContext(model, hw16, job)
    assert ctx16.gemm_fraction == ctx16.compute_fraction

    # faster FP8 GEMMs make a faster FP8 plan, and the JSON says how each share entered it
    slow = plan_training(model, hw16, job, LayoutConstraints(tp=1, pp=1))
    fast = plan_training(model, hw, job, LayoutConstraints(tp=1, pp=1))
    assert fast.step_time_s < slow.step_time_s
    measured = fast.to_dict()["measured"]
    assert "fp8 GEMMs" in measured["power_capped_gemm_share_fp8"]["training"]


def test_cli_takes_fp8(tmp_path: Path) -> None:
    db = tmp_path / "c.sqlite"
    r = run_cli(
        "bench", "sustained", "--device", "cpu", "--dtype", "fp8", "--size", "128",
        "--seconds", "0.3", "--window", "0.1", "--json", "--db", str(db),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["dtype"] == "fp8"
    bad = run_cli("bench", "sustained", "--device", "cpu", "--dtype", "int4", "--db", str(db))
    assert bad.returncode != 0 and "invalid choice" in bad.stderr
