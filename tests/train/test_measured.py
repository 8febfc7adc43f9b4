"""`flopwise plan train --measured latest`: stored benchmark results change the plan."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from flopwise.results.store import ResultStore

ARGS = (
    "plan",
    "train",
    "llama-3.1-8b",
    "-a",
    "h100-sxm",
    "--gpus",
    "64",
    "--tokens",
    "1T",
    "--tp",
    "1",
    "--pp",
    "1",
    "--cp",
    "1",
    "--microbatch",
    "1",
    "--recompute",
    "selective",
    "--zero",
    "1",
    "--json",
)


def _plan(*extra: str) -> dict[str, object]:
    r = run_cli(*ARGS, *extra)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert isinstance(doc, dict)
    return doc


def test_measured_latest_changes_the_plan_and_says_where_numbers_came_from(
    tmp_path: Path,
) -> None:
    db = tmp_path / "results.db"
    store = ResultStore(db)
    # a GPU whose GEMMs reach 600 of the catalog's 794.5 bf16 MAMF TFLOPS and whose triad
    # reaches 2,600 GB/s (catalog: 3,350 GB/s peak x 0.85 = 2,847 GB/s assumed)
    mm = store.add(
        "matmul", {"dtype": "bf16", "best_tflops": 600.0}, {}, accelerator="h100-sxm", host="n1"
    )
    mem = store.add("memory", {"triad_gbps": 2600.0}, {}, accelerator="h100-sxm", host="n1")
    # a run on another accelerator must not leak in
    store.add("matmul", {"dtype": "bf16", "best_tflops": 1.0}, {}, accelerator="a100-sxm-80gb")

    base = _plan()
    measured = _plan("--measured", "latest", "--db", str(db))

    assert base["measured"] == {}
    src = measured["measured"]
    assert isinstance(src, dict)
    # fp16 runs on bf16's tensor cores: the measured bf16 rate prices it too, and says so
    assert set(src) == {"matmul_tflops:bf16", "matmul_tflops:fp16", "achievable_bw_gbps"}
    assert src["matmul_tflops:fp16"]["value"] == 600.0
    assert "measured as bf16" in src["matmul_tflops:fp16"]["source"]
    assert src["matmul_tflops:bf16"]["value"] == 600.0
    assert f"result {mm}" in src["matmul_tflops:bf16"]["source"]
    assert src["achievable_bw_gbps"]["value"] == 2600.0
    assert f"result {mem}" in src["achievable_bw_gbps"]["source"]

    # slower GEMMs and HBM: a longer step, mostly in compute, and a lower MFU
    assert measured["layout"] == base["layout"]
    assert measured["step_time_s"] > 1.15 * base["step_time_s"]  # type: ignore[operator]
    b0, b1 = base["breakdown"], measured["breakdown"]
    assert b1["compute_s"] > 1.2 * b0["compute_s"]  # type: ignore[index]
    assert measured["mfu"] < base["mfu"]  # type: ignore[operator]


def test_measured_without_results_names_the_benchmarks(tmp_path: Path) -> None:
    r = run_cli(*ARGS, "--measured", "latest", "--db", str(tmp_path / "empty.db"))
    assert r.returncode == 2
    assert "flopwise bench matmul" in r.stderr
    assert "Traceback" not in r.stderr
