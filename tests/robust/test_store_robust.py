"""The results store under hostile conditions: many writers, bad rows, read-only media."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli
from flopwise.errors import FlopwiseError
from flopwise.results.store import ResultStore
from robust.readonly import read_only

SRC = str(Path(__file__).resolve().parents[2] / "src")

_WRITER = """
import sys, time
from flopwise.results.store import ResultStore
store = ResultStore(sys.argv[1])
w = int(sys.argv[2])
while time.time() < float(sys.argv[4]):  # every writer opens the fresh store at the same time
    time.sleep(0.001)
for i in range(int(sys.argv[3])):
    store.add("matmul", {"writer": w, "i": i, "best_tflops": 1.0}, {"w": w}, accelerator="cpu")
"""


@pytest.mark.slow
def test_sixteen_writers_on_a_fresh_store_lose_no_row(tmp_path: Path) -> None:
    """Item 2: WAL set-up on a new file used to fail at once with 'database is locked'."""
    db = tmp_path / "fresh.sqlite"
    env = {**os.environ, "PYTHONPATH": SRC}
    writers, rows = 16, 10
    start_at = str(time.time() + 3.0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(db), str(w), str(rows), start_at],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(writers)
    ]
    errors = [p.communicate(timeout=180)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for e in errors if e][:2]
    got = {(r.summary["writer"], r.summary["i"]) for r in ResultStore(db).list()}
    assert got == {(w, i) for w in range(writers) for i in range(rows)}


def test_switching_a_fresh_store_to_wal_waits_for_a_busy_peer(tmp_path: Path) -> None:
    """Item 2, deterministically: `PRAGMA journal_mode=WAL` while a peer holds the write lock
    of a brand-new file used to fail at once ('database is locked') instead of waiting."""
    import threading

    db = tmp_path / "fresh.sqlite"
    peer = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    peer.execute("CREATE TABLE scratch (x)")
    peer.execute("BEGIN IMMEDIATE")
    peer.execute("INSERT INTO scratch VALUES (1)")
    release = threading.Timer(0.5, lambda: peer.execute("COMMIT"))
    release.start()
    try:
        rid = ResultStore(db).add("matmul", {"best_tflops": 1.0}, {}, accelerator="cpu")
    finally:
        release.join()
        peer.close()
    assert ResultStore(db).get(rid).summary == {"best_tflops": 1.0}


def _store_with_bad_rows(db: Path) -> None:
    store = ResultStore(db)
    store.add("matmul", {"best_tflops": 1.0}, {}, accelerator="cpu")
    store.add("matmul", {"best_tflops": 2.0}, {}, accelerator="cpu")
    store.add("matmul", {"best_tflops": 3.0}, {}, accelerator="cpu")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE results SET summary = 'not json{' WHERE id = 2")
        conn.execute("UPDATE results SET summary = '[1, 2]' WHERE id = 3")


def test_one_bad_row_does_not_hide_the_others(tmp_path: Path) -> None:
    """Item 7: non-JSON and list summaries are skipped and named, the good row is listed."""
    db = tmp_path / "r.sqlite"
    _store_with_bad_rows(db)
    store = ResultStore(db)
    assert [r.id for r in store.list()] == [1]
    assert any("id 2" in s and "not JSON" in s for s in store.skipped)
    assert any("id 3" in s and "list" in s for s in store.skipped)
    for args in (("list",), ("list", "--json"), ("export",), ("export", "--csv")):
        r = run_cli("results", *args, "--db", str(db))
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr and "id 2" in r.stderr and "id 3" in r.stderr
    r = run_cli("results", "list", "--json", "--db", str(db))
    assert [x["id"] for x in json.loads(r.stdout)["results"]] == [1]
    r = run_cli("results", "show", "2", "--db", str(db))
    assert r.returncode == 2 and "not JSON" in r.stderr and "Traceback" not in r.stderr


def test_a_dropped_column_is_named_not_an_index_error(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    ResultStore(db).add("matmul", {"best_tflops": 1.0}, {}, accelerator="cpu")
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE results DROP COLUMN payload")
    r = run_cli("results", "list", "--db", str(db))
    assert "Traceback" not in r.stderr and "payload" in r.stderr
    with pytest.raises(FlopwiseError, match="lacks column"):
        ResultStore(db).check_writable()


@pytest.mark.parametrize(
    "args",
    [
        ("show", "99999999999999999999"),
        ("list", "--limit", "99999999999999999999"),
        ("export", "--kind", "matmul"),
    ],
)
def test_huge_numbers_are_answered_not_crashed(tmp_path: Path, args: tuple[str, ...]) -> None:
    """Item 8: an id beyond SQLite's integers is 'no such result', a huge limit is no limit."""
    db = tmp_path / "r.sqlite"
    ResultStore(db).add("matmul", {"best_tflops": 1.0}, {}, accelerator="cpu")
    r = run_cli("results", *args, "--db", str(db))
    assert "Traceback" not in r.stderr and "unusable" not in r.stderr
    if args[0] == "show":
        assert r.returncode == 2 and "no stored result" in r.stderr
    else:
        assert r.returncode == 0, r.stderr


def test_a_store_on_read_only_media_can_still_be_read(tmp_path: Path) -> None:
    """Item 6: list/show/report open the store read-only when it cannot be written."""
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "r.sqlite"
    ResultStore(db).add("matmul", {"best_tflops": 4.5}, {}, accelerator="cpu")
    with read_only(folder):
        r = run_cli("results", "list", "--json", "--db", str(db))
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["results"][0]["summary"]["best_tflops"] == 4.5
        r = run_cli("results", "show", "1", "--db", str(db))
        assert r.returncode == 0, r.stderr
        with pytest.raises(FlopwiseError, match=r"r\.sqlite"):
            ResultStore(db).check_writable()


def test_latest_skips_runs_without_the_figure(tmp_path: Path) -> None:
    """Item 4: a run with no best TFLOPS never hides the last good one."""
    store = ResultStore(tmp_path / "r.sqlite")
    good = store.add("matmul", {"best_tflops": 7.0, "dtype": "fp32"}, {}, accelerator="cpu")
    store.add("matmul", {"best_tflops": None, "dtype": "fp32"}, {}, accelerator="cpu")
    latest = store.latest("matmul", "cpu")
    assert latest is not None and latest.id == good
