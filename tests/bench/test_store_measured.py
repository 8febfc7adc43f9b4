"""Results round-trip through the store (concurrent writers too) and change a plan."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flopwise.bench.device import resolve_device
from flopwise.bench.matmul_run import MatmulConfig, run_matmul
from flopwise.bench.memory import MemoryConfig, run_memory
from flopwise.bench.provenance import save_run
from flopwise.results.measured import cpu_hardware, hardware_for
from flopwise.results.store import ResultStore

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _tiny_matmul(dtype: str = "fp32") -> object:
    return run_matmul(
        MatmulConfig(
            device="cpu",
            dtype=dtype,
            search="grid",
            m=(32, 64),
            n=(32,),
            k=(32,),
            iterations=2,
            warmup=0,
            device_warmup_s=0.0,
        )
    )


def test_matmul_run_round_trips_through_the_store(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    run = _tiny_matmul()
    info = resolve_device("cpu")
    rid = save_run(
        "matmul", summary=run.summary(), payload=run.to_dict(), status=run.status, info=info, db=db
    )
    got = ResultStore(db).get(rid)
    assert got.kind == "matmul" and got.status == "complete" and got.accelerator == "cpu"
    assert got.summary == json.loads(json.dumps(run.summary()))
    assert got.payload["results"] == run.to_dict()["results"]
    assert got.payload["provenance"]["torch_version"]
    for key in (
        "dtype",
        "best_tflops",
        "best_shape",
        "median_tflops_at_best",
        "shapes_tried",
        "elapsed_s",
        "spec_tflops",
        "efficiency",
    ):
        assert key in got.summary


def test_interrupted_runs_are_stored_but_not_used_as_measurements(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    store = ResultStore(db)
    store.add(
        "matmul", {"dtype": "fp32", "best_tflops": 1.0}, {}, status="interrupted", accelerator="cpu"
    )
    assert store.list()[0].status == "interrupted"
    assert store.latest("matmul", "cpu") is None


_WRITER = """
import sys
from flopwise.results.store import ResultStore
store = ResultStore(sys.argv[1])
w = int(sys.argv[2])
for i in range(int(sys.argv[3])):
    store.add("matmul", {"writer": w, "i": i, "best_tflops": w + i / 100},
              {"blob": "x" * 2000, "writer": w, "i": i}, device=f"cuda:{w}", accelerator="cpu")
"""


@pytest.mark.slow
def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "shared.sqlite"
    env = {**os.environ, "PYTHONPATH": SRC}
    writers, rows = 6, 25
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(db), str(w), str(rows)], env=env)
        for w in range(writers)
    ]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    stored = ResultStore(db).list()
    assert len(stored) == writers * rows
    assert len({r.id for r in stored}) == writers * rows
    got = {(r.summary["writer"], r.summary["i"]) for r in stored}
    assert got == {(w, i) for w in range(writers) for i in range(rows)}
    for r in stored:
        assert r.payload["blob"] == "x" * 2000 and r.payload["writer"] == r.summary["writer"]


def test_stored_cpu_measurements_describe_the_cpu(tmp_path: Path) -> None:
    """A real (tiny) matmul and memory run feed the hardware description planners use."""
    db = tmp_path / "r.sqlite"
    info = resolve_device("cpu")
    mm = _tiny_matmul("bf16")
    mem = run_memory(MemoryConfig(device="cpu", array_bytes=2**20, iterations=2))
    save_run(
        "matmul", summary=mm.summary(), payload=mm.to_dict(), status=mm.status, info=info, db=db
    )
    save_run(
        "memory", summary=mem.summary(), payload=mem.to_dict(), status=mem.status, info=info, db=db
    )
    hw = cpu_hardware(str(db))
    assert hw.matmul_tflops["bf16"] == pytest.approx(mm.summary()["best_tflops"])
    assert hw.achievable_bw_gbps == pytest.approx(mem.summary()["triad_gbps"])
    assert hw.origins["achievable_bw_gbps"].kind == "measured"


def test_measured_results_change_a_plan(tmp_path: Path) -> None:
    """Stored matmul/memory summaries replace the catalog's numbers in the planner's inputs."""
    from flopwise.plan.roofline import (
        achievable_matmul_tflops,
        gemm_time_s,
        memory_bw_bytes_per_s,
    )

    db = str(tmp_path / "r.sqlite")
    catalog = hardware_for("h100-sxm")
    store = ResultStore(db)
    store.add("matmul", {"dtype": "bf16", "best_tflops": 650.0}, {}, accelerator="h100-sxm")
    store.add("memory", {"triad_gbps": 2900.0}, {}, accelerator="h100-sxm")
    measured = hardware_for("h100-sxm", measured="latest", db=db)
    assert achievable_matmul_tflops(measured, "bf16") == 650.0
    assert achievable_matmul_tflops(catalog, "bf16") != 650.0
    assert memory_bw_bytes_per_s(measured) == 2900.0e9
    assert memory_bw_bytes_per_s(catalog) != 2900.0e9
    assert gemm_time_s(8192, 8192, 8192, measured, "bf16") != gemm_time_s(
        8192, 8192, 8192, catalog, "bf16"
    )
    assert measured.origins["matmul_tflops:bf16"].kind == "measured"


def test_plan_train_measured_latest_uses_the_stored_results(tmp_path: Path) -> None:
    from conftest import run_cli

    db = str(tmp_path / "r.sqlite")
    store = ResultStore(db)
    store.add("matmul", {"dtype": "bf16", "best_tflops": 500.0}, {}, accelerator="h100-sxm")
    store.add("memory", {"triad_gbps": 2000.0}, {}, accelerator="h100-sxm")
    args = (
        "plan",
        "train",
        "llama-3.1-8b",
        "-a",
        "h100-sxm",
        "--gpus",
        "8",
        "--tokens",
        "1T",
        "--json",
        "--db",
        db,
    )
    catalog = run_cli(*args)
    measured = run_cli(*args, "--measured", "latest")
    assert catalog.returncode == 0 and measured.returncode == 0, measured.stderr
    days_catalog = json.loads(catalog.stdout)["train_days"]
    days_measured = json.loads(measured.stdout)["train_days"]
    # 500 TFLOPS measured is below the catalog's published H100 MAMF: the plan gets longer.
    assert days_measured > days_catalog * 1.1
