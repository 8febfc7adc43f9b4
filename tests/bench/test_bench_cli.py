"""`flopwise bench matmul|memory` through the real CLI (subprocesses, tiny sizes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import communicate_or_kill, run_cli

MATMUL_TINY = (
    "bench",
    "matmul",
    "--device",
    "cpu",
    "--m",
    "32",
    "64",
    "--n",
    "32",
    "--k",
    "32",
    "--search",
    "grid",
    "--iterations",
    "2",
    "--warmup",
    "0",
)


def test_matmul_json_is_one_document_and_is_stored(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    r = run_cli(*MATMUL_TINY, "--json", "--out", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # stdout holds the JSON document and nothing else
    for key in (
        "device",
        "device_name",
        "dtype",
        "best_tflops",
        "best_shape",
        "median_tflops_at_best",
        "shapes_tried",
        "elapsed_s",
        "spec_tflops",
        "efficiency",
        "provenance",
        "results",
    ):
        assert key in doc
    assert doc["device"] == "cpu" and doc["dtype"] == "fp32" and doc["shapes_tried"] == 2
    assert doc["spec_tflops"] is None and doc["efficiency"] is None
    assert {"host", "torch_version", "backend_version", "time"} <= set(doc["provenance"])
    assert json.loads(out.read_text())["best_tflops"] == doc["best_tflops"]
    listed = json.loads(run_cli("results", "list", "--json").stdout)["results"]
    assert [(x["id"], x["kind"], x["accelerator"]) for x in listed] == [
        (doc["result_id"], "matmul", "cpu")
    ]


def test_memory_json_and_table(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    r = run_cli(
        "bench",
        "memory",
        "--device",
        "cpu",
        "--array-size",
        "1MiB",
        "--iterations",
        "2",
        "--json",
        "--db",
        str(db),
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    for key in (
        "copy_gbps",
        "mul_gbps",
        "add_gbps",
        "triad_gbps",
        "dot_gbps",
        "spec_gbps",
        "efficiency",
    ):
        assert key in doc
    assert doc["triad_gbps"] > 0 and doc["array_bytes"] == 2**20
    shown = run_cli("results", "show", str(doc["result_id"]), "--db", str(db))
    assert shown.returncode == 0 and "triad" in shown.stdout


def test_matmul_table_output() -> None:
    r = run_cli(*MATMUL_TINY)
    assert r.returncode == 0, r.stderr
    assert "max TFLOPS" in r.stdout and "stored as result" in r.stdout
    listed = run_cli("results", "list")
    assert listed.returncode == 0 and "TFLOPS" in listed.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--device", "tpu"), "unknown device 'tpu'"),
        (("--device", "cuda:0"), "no cuda device"),
        (("--dtype", "int3"), "unknown dtype 'int3'"),
        (("--m-range", "100", "10", "5"), "--m-range 100 10 5 is empty"),
        (("--k-range", "0", "64", "0"), "step must be a positive integer"),
        (("--n", "0"), "must be a positive number"),
        (("--search", "random"), "invalid choice"),
        # the old code read 0 as "no budget given" and silently ran the 20 s default
        (("--budget-s", "0"), "must be a positive number"),
        (("--budget-s", "-1"), "must be a positive number"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: tuple[str, ...], message: str) -> None:
    dims: list[str] = []
    for d in ("m", "n", "k"):
        if f"--{d}" not in args and f"--{d}-range" not in args:
            dims += [f"--{d}", "32"]
    r = run_cli("bench", "matmul", *dims, *args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_missing_torch_is_one_line_exit_2(tmp_path: Path) -> None:
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named torch')\n")
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), src])}
    for cmd in (("bench", "matmul", "--device", "cpu"), ("bench", "memory")):
        r = subprocess.run(
            [sys.executable, "-m", "flopwise", *cmd],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert r.returncode == 2
        assert r.stderr.strip() == (
            "flopwise: error: the benchmarks need PyTorch: pip install 'flopwise[bench]'"
        )


def test_help_does_not_import_torch() -> None:
    code = (
        "import sys; from flopwise.cli.main import build_parser; build_parser(); "
        "print('torch' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "False", r.stderr


@pytest.mark.slow
def test_devices_runs_one_process_per_device_and_reports_spread() -> None:
    r = run_cli(
        "bench",
        "matmul",
        "--devices",
        "cpu",
        "--m",
        "32",
        "--n",
        "32",
        "--k",
        "32",
        "--iterations",
        "2",
        "--warmup",
        "0",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [d["device"] for d in doc["devices"]] == ["cpu"]
    assert doc["slowest"]["device"] == "cpu" and doc["spread"] == 0.0
    assert doc["devices"][0]["result_id"] >= 1


def test_devices_all_without_accelerators_is_a_clear_error() -> None:
    r = run_cli("bench", "matmul", "--devices", "all", "--m", "32", "--n", "32", "--k", "32")
    assert r.returncode == 2 and "found no local accelerators" in r.stderr


@pytest.mark.slow
def test_ctrl_c_prints_and_stores_the_partial_run(tmp_path: Path) -> None:
    import signal
    import time

    db = tmp_path / "r.sqlite"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flopwise",
            "bench",
            "matmul",
            "--device",
            "cpu",
            "--search",
            "grid",
            "--m-range",
            "64",
            "2048",
            "64",
            "--n-range",
            "64",
            "2048",
            "64",
            "--k",
            "512",
            "--iterations",
            "2",
            "--warmup",
            "0",
            "--json",
            "--db",
            str(db),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    maps = Path(f"/proc/{proc.pid}/maps")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        if maps.exists() and "libtorch" in maps.read_text(errors="replace"):
            break  # torch is loaded; the run starts measuring right after
        time.sleep(0.2)
    # torch (with numpy) finishes importing a few seconds after libtorch is mapped; then it
    # measures: the 1,024-shape grid takes far longer than this
    time.sleep(10)
    proc.send_signal(signal.SIGINT)
    out, err = communicate_or_kill(proc, 60)
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert doc["status"] == "interrupted" and 0 < doc["shapes_tried"] < 1024
    stored = json.loads(
        run_cli("results", "show", str(doc["result_id"]), "--db", str(db), "--json").stdout
    )
    assert stored["status"] == "interrupted"
    assert len(stored["payload"]["results"]) == doc["shapes_tried"]
