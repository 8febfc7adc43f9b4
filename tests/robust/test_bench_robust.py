"""Measurements are never lost: unusable stores, SIGTERM, failed runs, leftovers, bench io."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cluster.cluster_launch import base_env
from conftest import communicate_or_kill, run_cli
from flopwise.bench import io_ops
from flopwise.bench.io import IoConfig, run_io
from flopwise.errors import FlopwiseError
from flopwise.results.safe_save import keep
from flopwise.results.store import ResultStore
from robust.readonly import read_only

MATMUL_TINY = ("bench", "matmul", "--device", "cpu", "--m", "32", "--n", "32", "--k", "32",
               "--search", "grid", "--iterations", "2", "--warmup", "0")  # fmt: skip


def _bad_db(kind: str, tmp_path: Path) -> Path:
    db = tmp_path / "r.sqlite"
    if kind == "garbage":
        db.write_bytes(os.urandom(4096))
    elif kind == "text":
        db.write_text("these are my notes, not a database\n" * 50)
    elif kind == "directory":
        db.mkdir()
    elif kind == "dropped column":
        ResultStore(db).add("matmul", {"best_tflops": 1.0}, {}, accelerator="cpu")
        with sqlite3.connect(db) as conn:
            conn.execute("ALTER TABLE results DROP COLUMN device_name")
    elif kind == "missing folder under a file":
        (tmp_path / "afile").write_text("x")
        db = tmp_path / "afile" / "sub" / "r.sqlite"
    return db


@pytest.mark.parametrize(
    "kind", ["garbage", "text", "directory", "dropped column", "missing folder under a file"]
)
@pytest.mark.parametrize("bench", ["matmul", "memory", "io"])
def test_an_unusable_store_fails_before_measuring(bench: str, kind: str, tmp_path: Path) -> None:
    """Item 1: the store is checked first, so no measurement is thrown away at the end."""
    db = _bad_db(kind, tmp_path)
    args = {
        "matmul": MATMUL_TINY,
        "memory": ("bench", "memory", "--device", "cpu", "--array-size", "1M"),
        "io": ("bench", "io", "--path", str(tmp_path), "--size", "1M", "--block-size", "64K",
               "--files", "5"),
    }[bench]  # fmt: skip
    r = run_cli(*args, "--json", "--db", str(db), env_home=tmp_path / "home")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == "" and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and str(db.parent) in r.stderr
    assert not list((tmp_path / "home").glob("unsaved/*"))  # refused up front, nothing measured


def test_an_out_that_is_a_directory_fails_before_measuring(tmp_path: Path) -> None:
    r = run_cli(*MATMUL_TINY, "--out", str(tmp_path), env_home=tmp_path / "home")
    assert r.returncode == 2 and "is a directory" in r.stderr and "Traceback" not in r.stderr


def test_a_read_only_store_fails_before_measuring(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "r.sqlite"
    ResultStore(db).add("matmul", {"best_tflops": 1.0}, {}, accelerator="cpu")
    with read_only(folder):
        r = run_cli(*MATMUL_TINY, "--db", str(db), env_home=tmp_path / "home")
    assert r.returncode == 2 and "r.sqlite" in r.stderr and "Traceback" not in r.stderr


def test_a_failed_save_keeps_the_result_in_a_named_file(isolated_home: Path) -> None:
    def refuse() -> int:
        raise FlopwiseError("results store 'x' is unusable: disk I/O error")

    doc: dict[str, Any] = {"best_tflops": 12.5}
    outcome = keep("matmul", doc, refuse)
    assert outcome.result_id is None and outcome.problem is not None
    assert "disk I/O error" in outcome.problem
    kept = Path(outcome.problem.split("kept in ")[1].rstrip(")"))
    assert kept.exists() and json.loads(kept.read_text())["best_tflops"] == 12.5


def test_cli_prints_the_result_when_saving_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    from flopwise.bench import provenance
    from flopwise.cli.main import main

    def refuse(*a: Any, **k: Any) -> int:
        raise FlopwiseError("results store is unusable: database or disk is full")

    monkeypatch.setattr(provenance, "save_run", refuse)
    code = main([*MATMUL_TINY, "--json"])
    out, err = capsys.readouterr()
    assert code == 2
    assert json.loads(out)["best_tflops"] > 0  # the measurement is printed
    assert "disk is full" in err and "kept in" in err and len(err.strip().splitlines()) == 1
    assert list((isolated_home / "unsaved").glob("flopwise-unsaved-matmul-*.json"))


def _wait_for_torch(proc: subprocess.Popen[str]) -> None:
    maps = Path(f"/proc/{proc.pid}/maps")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        if maps.exists() and "libtorch" in maps.read_text(errors="replace"):
            return
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.parametrize("bench", ["matmul", "memory"])
def test_sigterm_keeps_and_marks_the_partial_run(bench: str, tmp_path: Path) -> None:
    """Item 3: Slurm's SIGTERM at a time limit stores the partial run as 'interrupted'."""
    db = tmp_path / "r.sqlite"
    args = {
        "matmul": ["matmul", "--device", "cpu", "--search", "grid", "--m-range", "64", "2048",
                   "64", "--n-range", "64", "2048", "64", "--k", "512", "--iterations", "2",
                   "--warmup", "0"],
        "memory": ["memory", "--device", "cpu", "--array-size", "8M", "--iterations", "1000000"],
    }[bench]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "flopwise", "bench", *args, "--json", "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=base_env(tmp_path / "home"), start_new_session=True,
    )  # fmt: skip
    _wait_for_torch(proc)
    time.sleep(10)  # past the end of the torch import; both runs take far longer than this
    proc.send_signal(signal.SIGTERM)
    out, err = communicate_or_kill(proc, 60)
    assert proc.returncode == 130, err
    assert json.loads(out)["status"] == "interrupted"
    stored = ResultStore(db).list(bench)
    assert len(stored) == 1 and stored[0].status == "interrupted"


def test_an_all_out_of_memory_run_is_failed_not_complete(tmp_path: Path) -> None:
    """Item 4: no shape measured means status 'failed', and it never becomes 'latest'."""
    from flopwise.bench.device import resolve_device
    from flopwise.bench.matmul_run import MatmulConfig, run_matmul
    from flopwise.bench.provenance import save_run

    info = resolve_device("cpu")
    tiny = dataclasses.replace(info, memory_bytes=info.flush_bytes)  # nothing else fits
    cfg = MatmulConfig(device="cpu", dtype="fp32", search="grid", m=(2048,), n=(2048,),
                       k=(2048,), iterations=2, warmup=0, device_warmup_s=0.0)  # fmt: skip
    run = run_matmul(cfg, info=tiny)
    assert run.status == "failed" and run.best_tflops is None
    assert "out of memory" in run.stop_reason or "oom" in run.stop_reason
    store = ResultStore(tmp_path / "r.sqlite")
    good = store.add("matmul", {"best_tflops": 3.0, "dtype": "fp32"}, {}, accelerator="cpu")
    save_run("matmul", summary=run.summary(), payload=run.to_dict(), status=run.status,
             info=info, db=store.path)  # fmt: skip
    latest = store.latest("matmul", "cpu")
    assert latest is not None and latest.id == good


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_killed_io_runs_folder_is_found_and_cleaned(tmp_path: Path) -> None:
    """Item 5: work folders name host and pid, so a later run removes a dead run's folder."""
    host = socket.gethostname()
    dead = tmp_path / f"{io_ops.WORKDIR_PREFIX}{host}-{_dead_pid()}-abcd1234"
    dead.mkdir()
    (dead / "checkpoint-shard-00000.bin").write_bytes(b"x" * 100_000)
    other = tmp_path / f"{io_ops.WORKDIR_PREFIX}elsewhere-1-abcd1234"
    other.mkdir()
    cfg = IoConfig(path=str(tmp_path), size_bytes=64 * 1024, writers=1, block_bytes=64 * 1024,
                   small_files=0)  # fmt: skip
    result = run_io(cfg)
    assert not dead.exists() and other.exists()
    assert any("removed" in n and dead.name in n for n in result.notes)
    assert any("not removed" in n and other.name in n for n in result.notes)
    # and this run's own folder says who made it
    assert io_ops.workdir_prefix().startswith(f"{io_ops.WORKDIR_PREFIX}")
    assert str(os.getpid()) in io_ops.workdir_prefix()


@pytest.mark.slow
def test_io_interrupted_after_the_checkpoint_phases_keeps_them(tmp_path: Path) -> None:
    """Item 3 (bench io): SIGTERM during the small-file phase keeps write/read GB/s."""
    target = tmp_path / "t"
    target.mkdir()
    db = tmp_path / "r.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "flopwise", "bench", "io", "--path", str(target), "--size", "1M",
         "--block-size", "64K", "--files", "5000000", "--file-size", "4K", "--json", "--db",
         str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=base_env(tmp_path / "home"), start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not list(target.glob(f"{io_ops.WORKDIR_PREFIX}*/small/sample-0000100.bin")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    out, err = communicate_or_kill(proc, 60)
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert doc["status"] == "interrupted" and doc["write_gbps"] > 0 and doc["read_gbps"] > 0
    stored = ResultStore(db).list("io")
    assert len(stored) == 1 and stored[0].status == "interrupted"
    assert stored[0].summary["write_gbps"] > 0
    assert not list(target.iterdir())  # its folder is gone


def test_writers_get_their_data_before_timing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 17: no random data is generated inside the timed write."""
    data = io_ops.random_block(64 * 1024)

    def no_urandom(n: int) -> bytes:
        raise AssertionError("os.urandom called inside the timed window")

    monkeypatch.setattr(io_ops.os, "urandom", no_urandom)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        write = io_ops.writer(Path(d) / "f.bin", 256 * 1024, data)
        write(threading.Event())
        assert (Path(d) / "f.bin").stat().st_size == 256 * 1024


def test_a_size_the_disk_cannot_hold_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Item 17: free space is checked before writing."""
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**9, 10**9 - 4096, 4096))
    cfg = IoConfig(path=str(tmp_path), size_bytes=1024 * 1024, writers=1,
                   block_bytes=64 * 1024, small_files=0)  # fmt: skip
    with pytest.raises(FlopwiseError, match="free"):
        run_io(cfg)
    assert not list(tmp_path.iterdir())


def test_ctrl_c_while_threads_start_is_an_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 17: 'cannot join thread before it is started' no longer replaces the Ctrl-C."""
    started = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if len(started) == 1:
            raise KeyboardInterrupt
        started.append(self)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(KeyboardInterrupt):
        io_ops.parallel([lambda stop: stop.wait(0.05)] * 3)


_MULTI = """
import json, sys
from flopwise.bench.matmul_run import MatmulConfig
from flopwise.bench.multi import run_matmul_devices
from flopwise.cli._signals import terminate_as_interrupt
cfg = MatmulConfig(dtype="fp32", search="grid", m=tuple(range(256, 8193, 64)),
                   n=tuple(range(256, 8193, 64)), k=(1024,), iterations=2, warmup=0,
                   device_warmup_s=0.0)  # ~15,000 shapes: hours on a CPU
with terminate_as_interrupt():
    run = run_matmul_devices(cfg, ["cpu", "cpu"], sys.argv[1])
print(json.dumps(run.to_dict()))
"""


@pytest.mark.slow
def test_sigterm_reaches_every_device_worker(tmp_path: Path) -> None:
    """--devices all: a SIGTERM to the parent (which, unlike Ctrl-C, the workers do not get)
    is passed on, and every worker stores its partial run instead of measuring on."""
    db = tmp_path / "r.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", _MULTI, str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=base_env(tmp_path / "home"), start_new_session=True,
    )  # fmt: skip
    time.sleep(25)  # both spawned workers have imported torch and are measuring (grid: minutes)
    proc.send_signal(signal.SIGTERM)
    out, err = communicate_or_kill(proc, 90)
    doc = json.loads(out)
    assert doc["status"] == "interrupted", err
    assert [d["status"] for d in doc["devices"]] == ["interrupted", "interrupted"], err
    stored = ResultStore(db).list("matmul")
    assert len(stored) == 2 and {s.status for s in stored} == {"interrupted"}
