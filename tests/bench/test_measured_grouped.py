"""`bench matmul --groups` times the MoE expert kernel, and `--measured` prices a plan's grouped
GEMMs from it (Hardware.matmul_grouped_shape_tflops), never its dense GEMMs or its MAMF."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from flopwise.bench.matmul_budget import ShapeTimeEstimator
from flopwise.bench.matmul_run import MatmulConfig
from flopwise.errors import FlopwiseError
from flopwise.hardware import hardware_from_catalog
from flopwise.plan.gemm import gemm_estimate
from flopwise.results.matmul_shapes import grouped_shape_table, shape_table
from flopwise.results.measured import hardware_for
from flopwise.results.store import ResultStore


def _shape(m: int, n: int, k: int, tflops: float, groups: int = 1) -> dict[str, object]:
    return {"m": m, "n": n, "k": k, "status": "ok", "tflops": tflops, "groups": groups}


def _add(store: ResultStore, best: float, shapes: list, groups: int = 1, **extra: object) -> int:  # type: ignore[type-arg]
    summary = {"dtype": "bf16", "best_tflops": best, "search": "grid", "groups": groups, **extra}
    return store.add("matmul", summary, {"results": shapes}, accelerator="h100-sxm")


def test_grouped_shapes_are_a_table_of_their_own() -> None:
    payload = {
        "results": [
            _shape(64, 4096, 4096, 100.0),
            _shape(512, 1536, 2048, 160.0, groups=128),
            {"m": 8, "n": 8, "k": 8, "status": "oom", "groups": 128},
        ]
    }
    assert shape_table(payload, "bf16") == (("bf16", 64, 4096, 4096, 100.0),)
    assert grouped_shape_table(payload, "bf16") == (("bf16", 128, 512, 1536, 2048, 160.0),)


def test_a_grouped_run_prices_grouped_gemms_and_leaves_dense_ones_and_the_mamf(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "r.sqlite")
    store = ResultStore(db)
    _add(store, 700.0, [_shape(8192, 8192, 8192, 700.0)], search="auto")
    # Qwen3-30B-A3B's up_proj on H100 as tgale96/grouped_gemm#37 timed it (128 experts)
    grouped = _add(
        store,
        160.5,
        [_shape(4096, 1536, 2048, 160.5, 128), _shape(256, 1536, 2048, 60.0, 128)],
        groups=128,
        grouped_kernel="torch._grouped_mm",
    )
    hw = hardware_for("h100-sxm", measured="latest", db=db)
    assert hw.matmul_tflops["bf16"] == 700.0  # a grouped run's best is not the device's MAMF
    assert hw.matmul_grouped_shape_tflops == (
        ("bf16", 128, 256, 1536, 2048, 60.0),
        ("bf16", 128, 4096, 1536, 2048, 160.5),
    )
    origin = hw.origins["matmul_grouped_shape_tflops:bf16"]
    assert origin.kind == "measured" and str(grouped) in origin.detail
    # at a measured grouped shape the grouped kernel runs at the measured rate ...
    est = gemm_estimate(4096, 1536, 2048, hw, "bf16", 128, grouped=True)
    assert est.tflops == pytest.approx(160.5, rel=1e-9)
    small = gemm_estimate(256, 1536, 2048, hw, "bf16", 128, grouped=True)
    assert small.tflops == pytest.approx(60.0, rel=1e-9)
    # ... while a dense GEMM of the same shape keeps the dense correction only
    dense_only = hardware_for("h100-sxm", measured="latest", db=_dense_db(tmp_path))
    assert gemm_estimate(4096, 1536, 2048, hw).kernel_s == pytest.approx(
        gemm_estimate(4096, 1536, 2048, dense_only).kernel_s, rel=1e-12
    )
    # between the two measured token counts the correction lies between theirs
    plain = hardware_from_catalog("h100-sxm")
    ratios = [
        gemm_estimate(m, 1536, 2048, hw, "bf16", 128, grouped=True).kernel_s
        / gemm_estimate(m, 1536, 2048, plain, "bf16", 128, grouped=True).kernel_s
        for m in (256, 1024, 4096)
    ]
    assert min(ratios[0], ratios[2]) <= ratios[1] <= max(ratios[0], ratios[2])


def _dense_db(tmp_path: Path) -> str:
    db = str(tmp_path / "dense.sqlite")
    _add(ResultStore(db), 700.0, [_shape(8192, 8192, 8192, 700.0)], search="auto")
    return db


def test_without_grouped_measurements_grouped_gemms_take_the_dense_correction(
    tmp_path: Path,
) -> None:
    hw = hardware_for("h100-sxm", measured="latest", db=_dense_db(tmp_path))
    plain = replace(hw, matmul_shape_tflops=())  # the same MAMF, no shape correction
    grouped = gemm_estimate(8192, 8192, 8192, hw, "bf16", 8, grouped=True).kernel_s
    grouped_plain = gemm_estimate(8192, 8192, 8192, plain, "bf16", 8, grouped=True).kernel_s
    dense = gemm_estimate(8192, 8192, 8192, hw).kernel_s
    dense_plain = gemm_estimate(8192, 8192, 8192, plain).kernel_s
    assert grouped / grouped_plain == pytest.approx(dense / dense_plain, rel=1e-9)


def _half_rate_grouped_db(tmp_path: Path) -> str:
    """A grouped run measuring every shape at half the rate the model gives it: the correction
    is 2 wherever it interpolates (all measured log ratios equal)."""
    plain = hardware_from_catalog("h100-sxm")
    shapes = [
        _shape(m, n, k, gemm_estimate(m, n, k, plain, "bf16", 8, grouped=True).tflops / 2, 8)
        for m, n, k in ((64, 14336, 4096), (4096, 14336, 4096), (512, 4096, 14336))
    ]
    db = str(tmp_path / "grouped.sqlite")
    _add(ResultStore(db), max(float(s["tflops"]) for s in shapes), shapes, groups=8)  # type: ignore[arg-type]
    return db


def _plan(run_cli, *args: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    out = run_cli(*args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_a_slow_grouped_kernel_slows_moe_plans_and_not_dense_ones(tmp_path: Path) -> None:
    from conftest import run_cli

    db = _half_rate_grouped_db(tmp_path)
    train = ("plan", "train", "-a", "h100-sxm", "--gpus", "16", "--tokens", "1B", "--seq-len")
    train += ("4096", "--global-batch-seqs", "64")
    measured = ("--measured", "latest", "--db", db)
    for model, moe in (("mixtral-8x7b", True), ("llama-3.1-8b", False)):
        base = _plan(run_cli, *train[:2], model, *train[2:])
        slow = _plan(run_cli, *train[:2], model, *train[2:], *measured)
        ratio = slow["step_time_s"] / base["step_time_s"]
        if moe:
            # the expert GEMMs are most of Mixtral's compute: twice as long, a much slower step
            assert 1.3 < ratio < 2.0
            assert "matmul_grouped_shape_tflops:bf16" in slow["measured"]
        else:
            assert ratio == pytest.approx(1.0, rel=1e-9)
    infer = ("plan", "infer", "mixtral-8x7b", "-a", "h100-sxm", "--tp", "2", "--gpus", "2")
    infer += ("--batch", "64", "--input-len", "1024", "--output-len", "256")
    base = _plan(run_cli, *infer)
    slow = _plan(run_cli, *infer, *measured)
    assert slow["ttft_ms"] > 1.3 * base["ttft_ms"]  # prefill: the experts' GEMMs compute-bound


def test_grouped_run_needs_its_shapes_and_a_16_or_32_bit_dtype() -> None:
    with pytest.raises(FlopwiseError, match=r"--m \(tokens per expert\)"):
        MatmulConfig(device="cpu", groups=8, m=(64,))
    with pytest.raises(FlopwiseError, match="at least 1"):
        MatmulConfig(device="cpu", groups=0)
    from conftest import run_cli

    out = run_cli("bench", "matmul", "--device", "cpu", "--groups", "4", "--dtype", "fp8")
    out2 = run_cli(
        "bench", "matmul", "--device", "cpu", "--groups", "4", "--dtype", "fp8", "--m", "8",
        "--n", "8", "--k", "8",
    )  # fmt: skip
    for o in (out, out2):
        assert o.returncode != 0 and "Traceback" not in o.stderr
        assert len(o.stderr.strip().splitlines()) == 1
    assert "fp8" in out2.stderr and "--groups" in out2.stderr


def test_the_budget_estimate_counts_every_group() -> None:
    one = ShapeTimeEstimator(iterations=3, warmup=1)
    eight = ShapeTimeEstimator(iterations=3, warmup=1, groups=8)
    for est in (one, eight):
        est.observe_rate(1e9, 1.0)  # 1 GFLOP/s measured
    assert eight((64, 64, 64)) == pytest.approx(8 * one((64, 64, 64)))  # type: ignore[operator]


def test_real_cpu_grouped_bench_feeds_a_moe_plan(tmp_path: Path) -> None:
    """A tiny real `bench matmul --groups` on the CPU (torch._grouped_mm): stored, read back as
    grouped shapes, reproduced by the shape model, and a tiny MoE's planned step moves."""
    pytest.importorskip("torch")
    from conftest import run_cli
    from flopwise.bench.device import resolve_device
    from flopwise.bench.matmul_run import run_matmul
    from flopwise.bench.memory import MemoryConfig, run_memory
    from flopwise.bench.provenance import save_run

    info = resolve_device("cpu")
    common = dict(device="cpu", dtype="fp32", iterations=2, warmup=0, device_warmup_s=0.0)
    dense = run_matmul(MatmulConfig(search="grid", m=(64, 256), n=(256,), k=(256,), **common))  # type: ignore[arg-type]
    grouped = run_matmul(MatmulConfig(groups=8, m=(16, 128), n=(384,), k=(256,), **common))  # type: ignore[arg-type]
    assert grouped.status == "complete" and grouped.search == "grid"
    assert grouped.summary()["groups"] == 8
    assert grouped.grouped_kernel in ("torch._grouped_mm", "torch.mm per group")
    assert all(r.groups == 8 for r in grouped.results)
    mem = run_memory(MemoryConfig(device="cpu", array_bytes=2**20, iterations=2))
    with_g, without = tmp_path / "g.sqlite", tmp_path / "d.sqlite"
    for db, runs in ((with_g, (dense, grouped)), (without, (dense,))):
        for kind, run in [*(("matmul", r) for r in runs), ("memory", mem)]:
            kept = {"summary": run.summary(), "payload": run.to_dict(), "status": run.status}
            save_run(kind, info=info, db=db, **kept)
    hw = hardware_for("cpu", measured="latest", db=str(with_g))
    assert hw.matmul_tflops["fp32"] == dense.best_tflops  # the grouped best is not the MAMF
    measured = {(g, m, n, k): t for _, g, m, n, k, t in hw.matmul_grouped_shape_tflops}
    assert set(measured) == {(8, 16, 384, 256), (8, 128, 384, 256)}
    for (g, m, n, k), tflops in measured.items():
        got = gemm_estimate(m, n, k, hw, "fp32", g, grouped=True).tflops
        assert got == pytest.approx(tflops, rel=1e-9)
    cfg = tmp_path / "tiny_moe.json"
    cfg.write_text(
        json.dumps(
            {
                "architectures": ["MixtralForCausalLM"],
                "model_type": "mixtral",
                "hidden_size": 256,
                "intermediate_size": 384,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 4,
                "vocab_size": 512,
                "max_position_embeddings": 1024,
                "num_local_experts": 8,
                "num_experts_per_tok": 2,
            }
        )
    )
    args = ("plan", "train", str(cfg), "-a", "cpu", "--measured", "latest", "--gpus", "1")
    args += ("--tokens", "1M", "--seq-len", "256", "--global-batch-seqs", "4", "--dtype", "fp32")
    steps = {
        name: _plan(run_cli, *args, "--db", str(db))["step_time_s"]
        for name, db in (("grouped", with_g), ("dense", without))
    }
    assert steps["grouped"] != pytest.approx(steps["dense"], rel=1e-3)
