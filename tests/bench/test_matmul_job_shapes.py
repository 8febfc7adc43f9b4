"""`bench matmul --model`: the GEMM shapes a training plan prices, measured, and priced back
at exactly the measured rates by `plan train --measured`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.plan.gemm import gemm_estimate
from flopwise.plan.train.gemm_shapes import training_gemm_shapes
from flopwise.results.measured import hardware_for
from flopwise.results.store import ResultStore
from flopwise.workload.hf import load_model


def test_the_shapes_are_what_the_plan_prices() -> None:
    """Llama 3.1 8B at TP 2: q/k/v fused, o, gate+up fused, down and the logits, each forward
    with its data- and weight-gradient GEMM (tokens 4096; the MLP and heads split by 2)."""
    got = {(g.m, g.n, g.k) for g in training_gemm_shapes(load_model("llama-3.1-8b"), tp=2)}
    t, h = 4096, 4096
    forwards = [
        (t, (32 * 128) // 2 + 4 * 2 * 128, h),  # q (16 heads) + k, v (4 of 8 kv heads each)
        (t, h, 2048),  # o
        (t, 2 * 14336 // 2, h),  # gate+up
        (t, h, 14336 // 2),  # down
        (t, 128256 // 2, h),  # logits, vocabulary split by TP
    ]
    want = {s for m, n, k in forwards for s in ((m, n, k), (m, k, n), (k, n, m))}
    assert got == want


def test_moe_experts_are_grouped_gemms_of_the_local_experts() -> None:
    shapes = training_gemm_shapes(load_model("qwen3-30b-a3b"), ep=8, seq_len=4096)
    grouped = {(g.groups, g.m, g.n, g.k) for g in shapes if g.grouped}
    # 128 experts over 8 ranks: 16 local; 4096 tokens x top-8 x 8 ranks / 128 = 2048 per expert
    assert (16, 2048, 2 * 768, 2048) in grouped and (16, 2048, 2048, 768) in grouped
    assert {g for g, *_ in grouped} == {16}
    # no dense MLP: every layer of Qwen3-30B-A3B is MoE (its intermediate_size is not priced)
    assert not any(g.n == 2 * 6144 for g in shapes)


def test_shapes_refuse_a_bad_job_in_one_line() -> None:
    with pytest.raises(FlopwiseError, match="does not split"):
        training_gemm_shapes(load_model("qwen3-30b-a3b"), ep=7)
    for args in (
        ("--model", "llama-3.1-8b", "--m", "64"),
        ("--model", "llama-3.1-8b", "--groups", "8"),
        ("--tp", "2"),
        ("--seq-len", "128"),
        ("--vocab", "128"),
        ("--model", "llama-3.1-8b", "--framework", "nope"),
    ):
        r = run_cli("bench", "matmul", "--device", "cpu", *args)
        assert r.returncode == 2 and "Traceback" not in r.stderr, args
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_job_run_makes_the_plan_price_each_shape_at_its_measured_rate(tmp_path: Path) -> None:
    """A stored --model run (dense and grouped shapes in one payload, as `bench matmul --model`
    stores it): at every one of the job's shapes the planner's GEMM runs at the stored rate."""
    from flopwise.hardware import hardware_from_catalog

    spec = load_model("mixtral-8x7b")
    shapes = training_gemm_shapes(spec, ep=2, seq_len=2048)
    plain = hardware_from_catalog("h100-sxm")
    rows = []
    for i, g in enumerate(shapes):  # rates 40-80% of the model's, different per shape
        model = gemm_estimate(g.m, g.n, g.k, plain, "bf16", g.groups, grouped=g.grouped).tflops
        rate = model * (0.4 + 0.4 * (i % 5) / 4)
        rows.append(
            {"m": g.m, "n": g.n, "k": g.k, "groups": g.groups, "status": "ok", "tflops": rate}
        )
    db = str(tmp_path / "r.sqlite")
    best = max(r["tflops"] for r in rows if r["groups"] == 1)
    ResultStore(db).add(
        "matmul",
        {"dtype": "bf16", "best_tflops": best, "search": "shapes", "groups": 1},
        {"results": rows},
        accelerator="h100-sxm",
    )
    hw = hardware_for("h100-sxm", measured="latest", db=db)
    assert any(r[1] == 4 for r in hw.matmul_grouped_shape_tflops)  # 8 experts over 2 ranks
    for g, row in zip(shapes, rows, strict=True):
        got = gemm_estimate(g.m, g.n, g.k, hw, "bf16", g.groups, grouped=g.grouped).tflops
        assert got == pytest.approx(row["tflops"], rel=1e-9), g


def test_real_cpu_job_run_is_stored_and_read_back(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "architectures": ["Qwen3MoeForCausalLM"],
                "model_type": "qwen3_moe",
                "hidden_size": 128,
                "intermediate_size": 256,
                "moe_intermediate_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "head_dim": 32,
                "vocab_size": 512,
                "max_position_embeddings": 1024,
                "num_experts": 16,
                "num_experts_per_tok": 4,
            }
        )
    )
    home = tmp_path / "home"
    r = run_cli("bench", "matmul", "--device", "cpu", "--model", str(cfg), "--seq-len", "64",
                "--iterations", "2", "--warmup", "0", "--json", env_home=home)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["search"] == "shapes" and doc["status"] == "complete"
    assert "training microbatch" in doc["label"] and "vocabulary 512" in doc["label"]
    want = training_gemm_shapes(load_model(str(cfg)), seq_len=64)
    got = {(x["groups"], x["m"], x["n"], x["k"]) for x in doc["results"] if x["status"] == "ok"}
    assert got == {(g.groups, g.m, g.n, g.k) for g in want}
    hw = hardware_for("cpu", measured="latest", db=str(home / "results.sqlite"))
    assert {(g, m, n, k) for _, g, m, n, k, _t in hw.matmul_grouped_shape_tflops} == {
        (g.groups, g.m, g.n, g.k) for g in want if g.grouped
    }
    assert len(hw.matmul_shape_tflops) == sum(1 for g in want if not g.grouped)
    # the best dense rate is the CPU's MAMF (no directed search stored)
    assert hw.matmul_tflops["fp32"] == pytest.approx(doc["best_tflops"])


def test_serving_shapes_are_the_forward_gemms_at_each_token_count() -> None:
    from flopwise.plan.train.gemm_shapes import forward_gemm_shapes

    got = {(g.m, g.n, g.k) for g in forward_gemm_shapes(load_model("llama-3.1-8b"), (1, 512))}
    pairs = {(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096)}
    assert got == {(t, n, k) for t in (1, 512) for n, k in pairs}
    moe = forward_gemm_shapes(load_model("qwen3-30b-a3b"), (64, 4096))
    # 64 tokens x top-8 over 128 experts: 4 rows per expert; 4096 tokens: 256
    assert {(g.groups, g.m) for g in moe if g.grouped} == {(128, 4), (128, 256)}
    with pytest.raises(FlopwiseError, match="positive token counts"):
        forward_gemm_shapes(load_model("llama-3.1-8b"), ())


def test_a_slow_serving_run_slows_the_serving_plan(tmp_path: Path) -> None:
    """A stored --tokens run whose every shape ran at half the model's rate: the serving plan's
    decode and prefill slow down (its GEMMs are most of both)."""
    from flopwise.hardware import hardware_from_catalog
    from flopwise.plan.train.gemm_shapes import forward_gemm_shapes

    plain = hardware_from_catalog("h100-sxm")
    shapes = forward_gemm_shapes(load_model("llama-3.1-8b"), (1, 16, 64, 256, 1024, 4096, 8192))
    rows = [
        {"m": g.m, "n": g.n, "k": g.k, "groups": 1, "status": "ok",
         "tflops": gemm_estimate(g.m, g.n, g.k, plain, "fp8").tflops / 2}
        for g in shapes
    ]  # fmt: skip
    db = str(tmp_path / "r.sqlite")
    store = ResultStore(db)
    # a directed search at the catalog's own fp8 MAMF first: the ceiling stays, only the shape
    # corrections act
    mamf = plain.matmul_tflops["fp8"]
    store.add("matmul", {"dtype": "fp8", "best_tflops": mamf, "search": "auto"}, {},
              accelerator="h100-sxm")  # fmt: skip
    store.add(
        "matmul",
        {"dtype": "fp8", "best_tflops": max(r["tflops"] for r in rows), "search": "shapes"},
        {"results": rows},
        accelerator="h100-sxm",
    )
    assert hardware_for("h100-sxm", measured="latest", db=db).matmul_tflops["fp8"] == mamf
    args = ("plan", "infer", "llama-3.1-8b", "-a", "h100-sxm", "--batch", "16", "--input-len",
            "2048", "--output-len", "256", "--weight-dtype", "fp8", "--json")  # fmt: skip
    base = json.loads(run_cli(*args).stdout)
    slow = json.loads(run_cli(*args, "--measured", "latest", "--db", db).stdout)
    assert slow["ttft_ms"] > 1.3 * base["ttft_ms"]
    assert slow["tpot_ms"] > 1.3 * base["tpot_ms"]
