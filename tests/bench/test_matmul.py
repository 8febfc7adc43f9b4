"""Real matmul measurements on the CPU at tiny sizes."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest

from flopwise.bench.device import resolve_device
from flopwise.bench.matmul import MatmulKernel, matmul_flops, parse_dtype
from flopwise.bench.matmul_run import MatmulConfig, run_matmul
from flopwise.errors import FlopwiseError
from flopwise.units import TERA

TINY: dict[str, Any] = {"device": "cpu", "iterations": 2, "warmup": 0, "device_warmup_s": 0.0}


def test_flop_count_is_exact() -> None:
    assert matmul_flops(3, 5, 7) == 210
    assert matmul_flops(1, 1, 1) == 2
    assert matmul_flops(20480, 20480, 20480) == 2 * 20480**3  # no float rounding


def test_grid_run_measures_exactly_the_requested_shapes() -> None:
    cfg = MatmulConfig(search="grid", m=(16, 48), n=(32,), k=(8, 24, 40), **TINY)
    run = run_matmul(cfg)
    shapes = [r.shape for r in run.results]
    assert shapes == list(itertools.product((16, 48), (32,), (8, 24, 40)))
    assert run.status == "complete" and run.stop_reason == "exhausted"
    for r in run.results:
        assert r.status == "ok" and r.iterations == 2
        assert r.min_s is not None and r.median_s is not None and r.min_s <= r.median_s
        # TFLOPS are the exact FLOP count over the measured time.
        assert r.max_tflops == pytest.approx(matmul_flops(r.m, r.n, r.k) / r.min_s / TERA)
        assert r.median_tflops == pytest.approx(matmul_flops(r.m, r.n, r.k) / r.median_s / TERA)
    s = run.summary()
    # the headline is the best shape's MEDIAN (the old code reported the fastest iteration)
    best = max(run.results, key=lambda r: r.median_tflops or 0)
    assert s["best_tflops"] == best.median_tflops and s["best_shape"] == list(best.shape)
    assert s["best_max_tflops"] == best.max_tflops >= s["best_tflops"]
    for r in run.to_dict()["results"]:  # the per-shape fields the GEMM model reads
        assert r["dtype"] == "fp32" and r["tflops"] == r["median_tflops"]
        assert r["tflops_max"] == r["max_tflops"] and r["spread"] >= 0
    assert s["dtype"] == "fp32" and s["spec_tflops"] is None and s["efficiency"] is None


def test_directed_run_stays_inside_ranges_and_budget() -> None:
    cfg = MatmulConfig(
        m=tuple(range(32, 257, 32)),
        n=tuple(range(32, 257, 32)),
        k=(64, 128, 256),
        budget_s=5.0,  # each timed iteration also zeroes a 256 MiB flush buffer
        **TINY,
    )
    run = run_matmul(cfg)
    assert run.results
    assert all(r.m in cfg.m and r.n in cfg.n and r.k in cfg.k for r in run.results)  # type: ignore[operator]
    assert len({r.shape for r in run.results}) == len(run.results)
    assert run.stop_reason in ("budget", "converged", "exhausted")
    assert run.elapsed_s < 5.0 + 10.0  # loose: shapes are estimated to fit before starting
    assert run.budget_s == 5.0


@pytest.mark.parametrize("search", ["grid", "auto"])
def test_interruption_keeps_partial_results(search: str) -> None:
    seen: list[Any] = []

    def stop_after_three(result: Any, elapsed: float) -> None:
        seen.append(result)
        if len(seen) == 3:
            raise KeyboardInterrupt

    cfg = MatmulConfig(search=search, m=(32, 64, 96, 128), n=(32, 64), k=(32, 64), **TINY)
    run = run_matmul(cfg, stop_after_three)
    assert run.status == "interrupted"
    assert [r.shape for r in run.results] == [r.shape for r in seen] and len(run.results) == 3
    assert run.summary()["best_tflops"] is not None
    assert run.summary()["status"] == "interrupted"


def test_out_of_memory_shape_is_recorded_and_skipped() -> None:
    info = resolve_device("cpu")
    # A device with just enough memory for the small shapes (flush buffer included).
    small = dataclasses.replace(info, memory_bytes=int((info.flush_bytes + 2**21) / 0.8))
    cfg = MatmulConfig(search="grid", m=(32, 4096), n=(32,), k=(4096,), **TINY)
    run = run_matmul(cfg, info=small)
    status = {r.shape: r.status for r in run.results}
    assert status == {(32, 32, 4096): "ok", (4096, 32, 4096): "oom"}
    assert run.summary()["best_shape"] == [32, 32, 4096]


def test_allocator_out_of_memory_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    from flopwise.bench.device import import_torch

    torch = import_torch()
    kernel = MatmulKernel(torch, resolve_device("cpu"), parse_dtype("fp32"))

    def boom(m: int, n: int, k: int) -> Any:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")

    monkeypatch.setattr(kernel, "prepare", boom)
    r = kernel.measure((64, 64, 64), 2, 0)
    assert r.status == "oom" and r.max_tflops is None


def test_dtype_the_cpu_cannot_do_is_a_clear_error() -> None:
    with pytest.raises(FlopwiseError, match="tf32 is a CUDA/XPU mode"):
        run_matmul(MatmulConfig(dtype="tf32", m=(16,), n=(16,), k=(16,), **TINY))


def test_fp8_runs_where_torch_scaled_mm_does() -> None:
    """This CPU build of PyTorch has torch._scaled_mm: FP8 is measured here, not refused; a
    device without it gets one line naming the dtype (check_dtype tries a 64^3 product)."""
    run = run_matmul(MatmulConfig(dtype="fp8", search="grid", m=(32,), n=(32,), k=(64,), **TINY))
    assert run.dtype == "fp8" and run.results and run.results[0].max_tflops


def test_unknown_dtype_lists_valid_ones() -> None:
    with pytest.raises(FlopwiseError, match="valid: bf16"):
        parse_dtype("int3")
    assert parse_dtype("bfloat16").name == "bf16"
    assert parse_dtype("FP32").element_bytes == 4


def test_bf16_runs_on_cpu() -> None:
    run = run_matmul(MatmulConfig(dtype="bf16", m=(32,), n=(32,), k=(32,), **TINY))
    assert run.dtype == "bf16" and run.results[0].status == "ok"


def test_per_device_worker_measures_and_stores_one_device(tmp_path: Any) -> None:
    from flopwise.bench.multi import MultiDeviceRun, matmul_worker
    from flopwise.results.store import ResultStore

    db = str(tmp_path / "r.sqlite")
    cfg = MatmulConfig(m=(32,), n=(32,), k=(32,), iterations=2, warmup=0, device_warmup_s=0.0)
    import signal

    before = signal.getsignal(signal.SIGINT)
    doc = matmul_worker(cfg, "cpu", db)
    # run in this process, the worker leaves Ctrl-C as it found it (an ignored SIGINT would
    # also be inherited by every process started after it)
    assert signal.getsignal(signal.SIGINT) == before
    assert doc["device"] == "cpu" and doc["best_tflops"] > 0
    assert ResultStore(db).get(doc["result_id"]).summary["best_tflops"] == doc["best_tflops"]
    fast = {**doc, "device": "cuda:1", "best_tflops": 2 * doc["best_tflops"]}
    report = MultiDeviceRun((doc, fast), "complete").to_dict()
    assert report["slowest"]["device"] == "cpu" and report["fastest"]["device"] == "cuda:1"
    assert report["spread"] == pytest.approx(0.5)


def test_cache_flush_reads_and_leaves_the_buffer_clean() -> None:
    """The flush between timed runs reads its buffer: a write (mamf-finder's zero_) leaves a
    cache full of dirty lines whose write-back the next, timed GEMM pays."""
    torch = pytest.importorskip("torch")
    kernel = MatmulKernel(torch, resolve_device("cpu"), parse_dtype("fp32"))
    buf = kernel.flush_buffer()
    assert buf.numel() * buf.element_size() >= resolve_device("cpu").flush_bytes
    buf.fill_(7)
    kernel.flush()
    assert int(buf.min()) == 7 and int(buf.max()) == 7
