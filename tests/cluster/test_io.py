"""Storage benchmark on a temp dir: positive rates, nothing left behind, bad paths refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.cluster_launch import base_env, one_json
from flopwise.bench.io import IoConfig, check_path, checkpoint_cost, run_io
from flopwise.bench.io_ops import MEMORY_FILESYSTEMS, WORKDIR_PREFIX, cache_method
from flopwise.errors import FlopwiseError
from flopwise.results.store import ResultStore
from flopwise.workload import count_params, load_model

TINY = IoConfig(path="", size_bytes=256 * 1024, writers=2, block_bytes=64 * 1024,
                small_files=50, small_file_bytes=4096)  # fmt: skip


def _snapshot(folder: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(folder)), p.stat().st_size) for p in folder.rglob("*"))


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A folder that already holds someone else's files, which must stay as they are."""
    folder = tmp_path / "storage"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "keep.bin").write_bytes(b"x" * 1000)
    (folder / "notes.txt").write_text("mine")
    return folder


def test_rates_positive_and_everything_removed(target: Path) -> None:
    before = _snapshot(target)
    cfg = IoConfig(**{**{f: getattr(TINY, f) for f in TINY.__slots__}, "path": str(target)})
    result = run_io(cfg)
    assert result.write_gbps > 0 and result.read_gbps > 0
    for rate in (result.files_per_s, result.create_files_per_s, result.stat_files_per_s):
        assert rate is not None and rate > 0
    assert result.bytes_per_writer == 128 * 1024 and result.writers == 2
    assert result.cache_bypass  # says how the page cache was handled
    assert _snapshot(target) == before


def test_cli_json_keys_and_stored_row(target: Path, isolated_home: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "flopwise", "bench", "io", "--path", str(target), "--size", "1M",
         "--writers", "2", "--block-size", "256K", "--files", "20", "--file-size", "1K",
         "--model", "llama-2-7b", "--json"],
        capture_output=True, text=True, timeout=120, env=base_env(isolated_home),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    doc = one_json(run.stdout)
    assert {"write_gbps", "read_gbps", "files_per_s", "detail"} <= set(doc)
    assert doc["detail"]["writers"] == 2 and doc["detail"]["small_files"] == 20
    ckpt = doc["checkpoint"]
    assert ckpt["recipe"] == "bf16-adam" and ckpt["bytes_per_param"] == 14
    assert ckpt["write_s"] == pytest.approx(ckpt["bytes"] / (doc["write_gbps"] * 1e9))
    (stored,) = ResultStore(isolated_home / "results.sqlite").list("io")
    assert stored.id == doc["result_id"]
    assert stored.summary["write_gbps"] == pytest.approx(doc["write_gbps"])
    assert not [p for p in target.iterdir() if p.name.startswith(WORKDIR_PREFIX)]


def test_checkpoint_bytes_come_from_the_accounting() -> None:
    params = count_params(load_model("llama-2-7b")).total
    cost = checkpoint_cost("llama-2-7b", "bf16-adam", write_gbps=2.0, read_gbps=4.0)
    assert cost["params"] == params and cost["bytes"] == params * 14  # 2 + 4 + 8 B/param
    assert cost["write_s"] == pytest.approx(params * 14 / 2e9)
    assert checkpoint_cost("llama-2-7b", "fp32-adam", 1.0, 1.0)["bytes_per_param"] == 12


def test_memory_file_systems_say_the_cache_cannot_be_bypassed(tmp_path: Path) -> None:
    direct, how = cache_method("tmpfs", tmp_path)
    assert not direct and "tmpfs" in how and "tmpfs" in MEMORY_FILESYSTEMS


@pytest.mark.parametrize("case", ["missing", "file", "not-writable"])
def test_bad_paths_are_refused(case: str, tmp_path: Path, isolated_home: Path) -> None:
    if case == "missing":
        path, needle = tmp_path / "nope", "does not exist"
    elif case == "file":
        path, needle = tmp_path / "f.txt", "is not a directory"
        path.write_text("x")
    else:
        path, needle = Path("/proc/self"), "not writable"
    with pytest.raises(FlopwiseError, match=needle):
        check_path(str(path))
    run = subprocess.run(
        [sys.executable, "-m", "flopwise", "bench", "io", "--path", str(path)],
        capture_output=True, text=True, timeout=60, env=base_env(isolated_home),
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and needle in run.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_cleans_up(sig: signal.Signals, target: Path, isolated_home: Path) -> None:
    before = _snapshot(target)
    proc = subprocess.Popen(
        [sys.executable, "-m", "flopwise", "bench", "io", "--path", str(target), "--size", "4G",
         "--block-size", "1M", "--files", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base_env(isolated_home),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not list(target.glob(f"{WORKDIR_PREFIX}*/checkpoint-shard-*")):
        assert proc.poll() is None and time.monotonic() < deadline, "benchmark never started"
        time.sleep(0.01)
    os.kill(proc.pid, sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert _snapshot(target) == before
    assert ResultStore(isolated_home / "results.sqlite").list("io") == []
