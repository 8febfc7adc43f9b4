"""`--measured` feeds measured GEMM rates by shape into the plan (Hardware.matmul_shape_tflops)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from flopwise.plan.gemm import gemm_estimate
from flopwise.results.matmul_shapes import shape_table
from flopwise.results.measured import hardware_for
from flopwise.results.store import ResultStore


def _shape(m: int, n: int, k: int, tflops: float, **extra: object) -> dict[str, object]:
    return {"m": m, "n": n, "k": k, "status": "ok", "tflops": tflops, **extra}


def test_shape_table_reads_tflops_and_ignores_extra_fields() -> None:
    payload = {
        "results": [
            _shape(64, 4096, 4096, 100.0, tflops_max=120.0, spread_pct=3.0),
            {"m": 8192, "n": 8192, "k": 8192, "status": "ok", "median_tflops": 700.0},
            {"m": 128, "n": 128, "k": 128, "status": "oom", "tflops": None},
            {"m": 1, "status": "error"},
        ]
    }
    assert shape_table(payload, "bf16") == (
        ("bf16", 64, 4096, 4096, 100.0),
        ("bf16", 8192, 8192, 8192, 700.0),
    )
    assert shape_table({}, "bf16") == ()


def test_measured_shapes_change_gemm_rates_per_shape(tmp_path: Path) -> None:
    db = str(tmp_path / "r.sqlite")
    store = ResultStore(db)
    shapes = [_shape(64, 4096, 4096, 100.0), _shape(8192, 8192, 8192, 700.0)]
    store.add(
        "matmul",
        {"dtype": "bf16", "best_tflops": 700.0},
        {"results": shapes},
        accelerator="h100-sxm",
    )
    hw = hardware_for("h100-sxm", measured="latest", db=db)
    assert hw.matmul_shape_tflops == (
        ("bf16", 64, 4096, 4096, 100.0),
        ("bf16", 8192, 8192, 8192, 700.0),
    )
    assert hw.origins["matmul_shape_tflops:bf16"].kind == "measured"
    one_number = replace(hw, matmul_shape_tflops=())
    # at a measured shape the kernel runs at the measured rate
    assert gemm_estimate(64, 4096, 4096, hw).tflops == pytest.approx(100.0, rel=1e-9)
    assert gemm_estimate(8192, 8192, 8192, hw).tflops == pytest.approx(700.0, rel=1e-9)
    # and the small-M and large GEMMs move by different factors
    small = (
        gemm_estimate(64, 4096, 4096, hw).kernel_s
        / gemm_estimate(64, 4096, 4096, one_number).kernel_s
    )
    large = (
        gemm_estimate(8192, 8192, 8192, hw).kernel_s
        / gemm_estimate(8192, 8192, 8192, one_number).kernel_s
    )
    assert abs(small - large) > 0.05
    # a shape between them is corrected by a factor between theirs
    mid = (
        gemm_estimate(512, 4096, 4096, hw).kernel_s
        / gemm_estimate(512, 4096, 4096, one_number).kernel_s
    )
    assert min(small, large) <= mid <= max(small, large)


def test_real_cpu_bench_feeds_plan_infer_per_shape(tmp_path: Path) -> None:
    """A tiny real `bench matmul` on the CPU changes plan infer's decode and prefill by the
    factors its skinny and square shapes measured, not by one number."""
    pytest.importorskip("torch")
    from conftest import run_cli
    from flopwise.bench.device import resolve_device
    from flopwise.bench.matmul_run import MatmulConfig, run_matmul
    from flopwise.bench.memory import MemoryConfig, run_memory
    from flopwise.bench.provenance import save_run

    info = resolve_device("cpu")
    mm = run_matmul(
        MatmulConfig(
            device="cpu",
            dtype="fp32",
            search="grid",
            m=(8, 256),
            n=(256,),
            k=(256,),
            iterations=2,
            warmup=0,
            device_warmup_s=0.0,
        )
    )
    mem = run_memory(MemoryConfig(device="cpu", array_bytes=2**20, iterations=2))
    full, bare = tmp_path / "shapes.sqlite", tmp_path / "one.sqlite"
    payload = mm.to_dict()
    for db, pl in ((full, payload), (bare, {k: v for k, v in payload.items() if k != "results"})):
        save_run("matmul", summary=mm.summary(), payload=pl, status=mm.status, info=info, db=db)
        save_run(
            "memory",
            summary=mem.summary(),
            payload=mem.to_dict(),
            status=mem.status,
            info=info,
            db=db,
        )
    hw = hardware_for("cpu", measured="latest", db=str(full))
    measured = {(m, n, k): t for _, m, n, k, t in hw.matmul_shape_tflops}
    assert set(measured) == {(8, 256, 256), (256, 256, 256)}
    for (m, n, k), tflops in measured.items():
        assert gemm_estimate(m, n, k, hw, "fp32").tflops == pytest.approx(tflops, rel=1e-9)

    cfg = tmp_path / "tiny.json"
    cfg.write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 256,
                "intermediate_size": 512,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 4,
                "vocab_size": 512,
                "max_position_embeddings": 1024,
            }
        )
    )
    args = ("plan", "infer", str(cfg), "-a", "cpu", "--measured", "latest", "--batch", "1")
    args += ("--input-len", "256", "--output-len", "8", "--json")
    got = {}
    for name, db in (("shapes", full), ("one", bare)):
        out = run_cli(*args, "--db", str(db))
        assert out.returncode == 0, out.stderr
        got[name] = json.loads(out.stdout)
    decode = got["shapes"]["tpot_ms"] / got["one"]["tpot_ms"]
    prefill = got["shapes"]["ttft_ms"] / got["one"]["ttft_ms"]
    assert decode != pytest.approx(1.0, rel=1e-3)
    assert decode != pytest.approx(prefill, rel=1e-3)


def _run(store: ResultStore, dtype: str, best: float, search: str, shapes: list) -> int:  # type: ignore[type-arg]
    return store.add(
        "matmul",
        {"dtype": dtype, "best_tflops": best, "search": search},
        {"results": shapes},
        accelerator="h100-sxm",
    )


def test_each_dtype_keeps_its_own_measurements(tmp_path: Path) -> None:
    """bf16 then fp8 (as `bench matmul --dtype bf16` then `--dtype fp8`): both MAMFs and both
    shape tables reach the plan, not only the newest run's (seen on an H100, 2026-11-23)."""
    db = str(tmp_path / "r.sqlite")
    store = ResultStore(db)
    _run(store, "bf16", 849.0, "auto", [_shape(8192, 8192, 8192, 849.0)])
    _run(store, "fp8", 1523.0, "auto", [_shape(8192, 8192, 8192, 1523.0)])
    hw = hardware_for("h100-sxm", measured="latest", db=db)
    assert hw.matmul_tflops["bf16"] == 849.0 and hw.matmul_tflops["fp8"] == 1523.0
    assert {row[0] for row in hw.matmul_shape_tflops} == {"bf16", "fp8"}
    assert hw.origins["matmul_tflops:bf16"].kind == "measured"


def test_grid_runs_add_shapes_without_lowering_the_mamf(tmp_path: Path) -> None:
    """A grid at a job's decode shapes after a directed search: its shapes join the table,
    and the MAMF stays the search's (the grid's best, 400, is not the device's maximum)."""
    db = str(tmp_path / "r.sqlite")
    store = ResultStore(db)
    _run(store, "bf16", 700.0, "auto", [_shape(8192, 8192, 8192, 700.0)])  # older search
    _run(store, "bf16", 849.0, "auto", [_shape(4096, 4096, 4096, 849.0)])
    _run(store, "bf16", 400.0, "grid", [_shape(64, 4096, 4096, 100.0), _shape(1, 4096, 4096, 2.0)])
    newest = _run(store, "bf16", 390.0, "grid", [_shape(64, 4096, 4096, 110.0)])
    hw = hardware_for("h100-sxm", measured="latest", db=db)
    assert hw.matmul_tflops["bf16"] == 849.0
    table = {(m, n, k): t for _, m, n, k, t in hw.matmul_shape_tflops}
    # the older search (8192^3) is outside the window; the newer grid wins at 64x4096x4096
    assert table == {(4096, 4096, 4096): 849.0, (64, 4096, 4096): 110.0, (1, 4096, 4096): 2.0}
    assert str(newest) in hw.origins["matmul_shape_tflops:bf16"].detail
    # a grid that beats the search raises the MAMF: the maximum is at least what it measured
    _run(store, "bf16", 900.0, "grid", [_shape(2048, 8192, 8192, 900.0)])
    assert hardware_for("h100-sxm", measured="latest", db=db).matmul_tflops["bf16"] == 900.0


def test_a_pinned_matmul_run_ignores_newer_runs_of_its_dtype(tmp_path: Path) -> None:
    db = str(tmp_path / "r.sqlite")
    store = ResultStore(db)
    pinned = _run(store, "bf16", 800.0, "auto", [_shape(8192, 8192, 8192, 800.0)])
    _run(store, "bf16", 500.0, "auto", [_shape(8192, 8192, 8192, 500.0)])
    _run(store, "fp8", 1500.0, "auto", [_shape(8192, 8192, 8192, 1500.0)])
    hw = hardware_for("h100-sxm", measured=str(pinned), db=db)
    assert hw.matmul_tflops["bf16"] == 800.0
    assert hw.matmul_tflops["fp8"] == 1500.0  # other dtypes: their latest runs


def test_measured_bf16_prices_fp16_when_fp16_was_not_measured(tmp_path: Path) -> None:
    db = str(tmp_path / "r.sqlite")
    store = ResultStore(db)
    _run(store, "bf16", 849.0, "auto", [_shape(8192, 8192, 8192, 849.0)])
    hw = hardware_for("h100-sxm", measured="latest", db=db)
    assert hw.matmul_tflops["fp16"] == 849.0  # not the catalog's 794.5
    assert "bf16" in hw.origins["matmul_tflops:fp16"].detail
    _run(store, "fp16", 800.0, "auto", [_shape(8192, 8192, 8192, 800.0)])
    assert hardware_for("h100-sxm", measured="latest", db=db).matmul_tflops["fp16"] == 800.0
