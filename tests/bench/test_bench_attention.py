"""`flopwise bench attention`: real causal SDPA runs on the CPU, the curve fit, partial results,
the store, and the measured curve reaching the training planner (`--measured`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from flopwise.bench.attention import (
    AttentionConfig,
    SeqResult,
    causal_fwd_flops,
    fit_curve,
    measure_seq,
    run_attention,
)
from flopwise.cli.bench_attention_cmd import parse_seq_lens
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_for
from flopwise.plan.train import LayoutConstraints, TrainJob, plan_training
from flopwise.results.store import ResultStore
from flopwise.workload.hf import load_model

SMALL = AttentionConfig(
    device="cpu",
    dtype="fp32",
    seq_lens=(64, 128, 256),
    heads=2,
    head_dim=32,
    tokens=512,
    iterations=2,
    warmup=1,
)


def test_fit_recovers_a_known_curve() -> None:
    pts = [(s, 600.0 * s / (s + 350.0)) for s in (1024, 2048, 4096, 8192, 16384, 32768)]
    fit = fit_curve(pts)
    assert fit is not None
    assert fit.rate_inf_tflops == pytest.approx(600.0, rel=0.02)
    assert fit.s_half == pytest.approx(350.0, rel=0.05)  # grid of 10^(1/50) steps
    assert fit.log_error < 0.005
    # a flat curve fits with no half-rate length
    flat = fit_curve([(512, 100.0), (1024, 100.0), (2048, 100.0)])
    assert flat is not None and flat.s_half == 0.0 and flat.rate_inf_tflops == pytest.approx(100)
    assert fit_curve([(1024, 500.0)]) is None  # one length: nothing to fit


def test_cpu_run_counts_flops_as_the_planner_does() -> None:
    run = run_attention(SMALL)
    assert run.status == "complete" and not run.skipped
    assert [r.seq_len for r in run.results] == [64, 128, 256]
    for r in run.results:
        assert r.batch == 512 // r.seq_len
        flops = causal_fwd_flops(r.batch, 2, r.seq_len, 32)
        assert flops == 2.0 * r.batch * 2 * r.seq_len**2 * 32
        assert r.fwd_tflops * 1e12 * r.fwd_s == pytest.approx(flops, rel=1e-9)
        assert r.bwd_tflops * 1e12 * r.bwd_s == pytest.approx(2.5 * flops, rel=1e-9)
        assert r.fwd_s > 0 and r.bwd_s > 0
    doc = run.to_dict()
    assert doc["fwd_fit"] is not None and doc["fwd_tflops_inf"] > 0
    assert doc["peak_tflops"] is None  # a CPU has no catalog peak
    json.dumps(doc)  # storable


def test_ctrl_c_keeps_what_was_measured() -> None:
    def stop_after_first(done: int, total: int) -> None:
        if done == 1:
            raise KeyboardInterrupt

    run = run_attention(SMALL, stop_after_first)
    assert run.status == "interrupted"
    assert [r.seq_len for r in run.results] == [64]


def test_a_length_out_of_memory_is_skipped_and_the_rest_measured() -> None:
    def flaky(*args: Any) -> SeqResult:
        seq_len = args[5]
        if seq_len == 128:
            raise RuntimeError("CUDA out of memory. Tried to allocate 8.00 GiB")
        if seq_len == 256:
            raise RuntimeError("No available kernel. Aborting execution.\nmore detail")
        return measure_seq(*args)

    run = run_attention(SMALL, measure=flaky)
    assert run.status == "complete"
    assert [r.seq_len for r in run.results] == [64]
    assert run.skipped == {128: "out of memory", 256: "No available kernel. Aborting execution."}
    assert run.fwd_fit is None  # one length measured: no curve, and none stored as one

    def always(*args: Any) -> SeqResult:
        raise RuntimeError("out of memory")

    with pytest.raises(FlopwiseError, match="no sequence length could be measured"):
        run_attention(SMALL, measure=always)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dtype": "fp8"}, "unknown attention dtype"),
        ({"backend": "triton"}, "unknown attention backend"),
        ({"head_dim": 300}, "--head-dim 300"),
        ({"head_dim": 60}, "--head-dim 60"),
        ({"seq_lens": (1,)}, "--seq-lens"),
        ({"heads": 0}, "--heads must be at least 1"),
    ],
)
def test_bad_settings_are_one_line_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(FlopwiseError, match=message):
        AttentionConfig(**kwargs)


def test_seq_lens_take_k_as_1024() -> None:
    assert parse_seq_lens("1024, 2048,32K") == (1024, 2048, 32768)
    with pytest.raises(FlopwiseError, match="not a length"):
        parse_seq_lens("1024,abc")
    r = run_cli("bench", "attention", "--seq-lens", "1e3")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "--seq-lens" in r.stderr


def test_cli_stores_the_run_and_results_list_reads_it(tmp_path: Path) -> None:
    db = str(tmp_path / "r.sqlite")
    args = ["--seq-lens", "64,128", "--heads", "2", "--head-dim", "32", "--tokens", "256"]
    r = run_cli("bench", "attention", "--device", "cpu", "--dtype", "fp32", *args, "--json",
                "--db", db, "--iterations", "2")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [row["seq_len"] for row in doc["results"]] == [64, 128]
    stored = ResultStore(db).get(doc["result_id"])
    assert stored.kind == "attention" and stored.summary["fwd_tflops_inf"] > 0
    listing = run_cli("results", "list", "--db", db, "--json")
    assert listing.returncode == 0
    assert [r["kind"] for r in json.loads(listing.stdout)["results"]] == ["attention"]
    from flopwise.present.results_view import _headline

    assert (_headline(stored) or "").startswith("causal attention fp32 d=32: forward")


FIXED = LayoutConstraints(tp=1, pp=1, dp=8, cp=1, vpp=1, microbatch=1, recompute="none", zero=1)


def _attention_s(hw_measured: str | None, db: str | None, head_dim_halved: bool = False) -> float:
    import dataclasses

    model = load_model("llama-3.1-8b")
    if head_dim_halved:
        model = dataclasses.replace(model, heads=64, kv_heads=16, head_dim=64, v_head_dim=64)
    hw = hardware_for("h100-sxm", "dgx-h100", hw_measured, db)
    job = TrainJob(gpus=8, seq_len=8192, global_batch_seqs=64)
    return plan_training(model, hw, job, FIXED).best.step.attention


def test_measured_curve_prices_the_attention_core(tmp_path: Path) -> None:
    """A stored curve (a fixture standing for an H100 run) replaces the catalog's GH100 rates:
    the attention seconds follow the ratio of the two curves at the job's sequence length."""
    db = str(tmp_path / "r.sqlite")
    catalog = _attention_s(None, None)
    ResultStore(db).add(
        "attention",
        {"dtype": "bf16", "head_dim": 128, "backend": "auto",
         "fwd_tflops_inf": 800.0, "fwd_s_half": 0.0, "bwd_tflops_inf": 700.0, "bwd_s_half": 0.0},
        {}, accelerator="h100-sxm",
    )  # fmt: skip
    measured = _attention_s("latest", db)
    from flopwise.plan.efficiency import gh100_attention_fraction

    peak = 989.4
    s = 8192
    t_cat = 1 / gh100_attention_fraction("flash", "fwd", s) + 2.5 / gh100_attention_fraction(
        "flash", "bwd", s
    )
    t_meas = peak / 800.0 + 2.5 * peak / 700.0
    assert measured / catalog == pytest.approx(t_meas / t_cat, rel=1e-6)
    # fp32 runs do not price a 16-bit GPU step; the catalog rates stay
    db2 = str(tmp_path / "r2.sqlite")
    ResultStore(db2).add(
        "attention",
        {"dtype": "fp32", "head_dim": 128, "fwd_tflops_inf": 50.0, "fwd_s_half": 0.0},
        {}, accelerator="h100-sxm",
    )  # fmt: skip
    ResultStore(db2).add("memory", {"triad_gbps": 2900.0}, {}, accelerator="h100-sxm")
    assert _attention_s("latest", db2) == pytest.approx(catalog, rel=1e-9)


def test_measured_curve_is_scaled_from_its_own_head_dimension(tmp_path: Path) -> None:
    db = str(tmp_path / "r.sqlite")
    ResultStore(db).add(
        "attention",
        {"dtype": "bf16", "head_dim": 64, "fwd_tflops_inf": 600.0, "fwd_s_half": 0.0,
         "bwd_tflops_inf": 600.0, "bwd_s_half": 0.0},
        {}, accelerator="h100-sxm",
    )  # fmt: skip
    # measured at head dim 64: a head-dim-64 model runs at the measured rate exactly
    at64 = _attention_s("latest", db, head_dim_halved=True)
    model_flops_s = at64 * 600e12  # fwd at 600, bwd (2.5x the FLOPs) at 600: 3.5 x fwd FLOPs
    assert model_flops_s > 0
    # ... and a 128-wide model faster, by the head-dimension factor from 64 to 128
    at128 = _attention_s("latest", db)
    from flopwise.plan.attention_head_dim import head_dim_factor

    g_f = head_dim_factor("h100-sxm", 128, direction="fwd", reference_dim=64)
    g_b = head_dim_factor("h100-sxm", 128, direction="bwd", reference_dim=64)
    assert at128 / at64 == pytest.approx((1 / g_f + 2.5 / g_b) / 3.5, rel=1e-6)
    assert math.isfinite(at128)


def test_cpu_measurements_reach_a_cpu_plan(tmp_path: Path) -> None:
    """Real runs on this CPU (matmul, memory, attention), then `plan train -a cpu --measured
    latest`: the plan names the attention curve among its measured inputs (the arithmetic of
    using it is checked against a stored curve above)."""
    db = str(tmp_path / "r.sqlite")
    cfg = tmp_path / "tiny" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps({
        "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
        "vocab_size": 512, "max_position_embeddings": 1024,
    }))  # fmt: skip
    for argv in (
        ("matmul", "--device", "cpu", "--dtype", "fp32", "--search", "grid",
         "--m", "256", "--n", "256", "--k", "256"),
        ("memory", "--device", "cpu", "--array-size", "32MiB", "--iterations", "2"),
        ("attention", "--device", "cpu", "--dtype", "fp32", "--seq-lens", "128,256,512",
         "--heads", "4", "--head-dim", "64", "--tokens", "1024", "--iterations", "2"),
    ):  # fmt: skip
        r = run_cli("bench", *argv, "--db", db, "--json")
        assert r.returncode == 0, r.stderr
    r = run_cli("plan", "train", str(cfg), "-a", "cpu", "--measured", "latest", "--db", db,
                "--gpus", "1", "--tokens", "1M", "--seq-len", "512", "--global-batch-seqs", "4",
                "--dtype", "fp32", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    measured = plan["measured"]["attention_tflops_curve"]
    assert "bench attention fp32" in measured["source"]
    assert plan["breakdown"]["compute_s"] > 0 and 0 < plan["attention_share"] < 1
    # the text view prints the curve among the measured inputs
    r = run_cli("plan", "train", str(cfg), "-a", "cpu", "--measured", "latest", "--db", db,
                "--gpus", "1", "--tokens", "1M", "--seq-len", "512", "--global-batch-seqs", "4",
                "--dtype", "fp32")  # fmt: skip
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    text = " ".join(r.stdout.replace("│", " ").replace("┃", " ").split())  # unwrap the table
    assert "attention_tflops_curve fwd" in text and "TFLOPS (half at" in text
