"""SQLite plumbing of the results store: safe set-up under many writers, read-only fallbacks.

SQLite's busy timeout does not cover every step: switching a new file to WAL
(``PRAGMA journal_mode``) and some schema work return "database is locked" at once when another
connection holds a lock (sqlite.org/wal.html, "Persistence of WAL mode"; sqlite.org/c3ref/
busy_timeout.html). Those steps are retried here with back-off, so 16 processes opening a
fresh store together all get their rows in.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'complete',
    created_at TEXT NOT NULL,
    host TEXT NOT NULL,
    device TEXT,
    device_name TEXT,
    accelerator TEXT,
    summary TEXT NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_kind ON results (kind, accelerator, id);
"""
COLUMNS: tuple[str, ...] = (
    "id",
    "kind",
    "status",
    "created_at",
    "host",
    "device",
    "device_name",
    "accelerator",
    "summary",
    "payload",
)

#: How long a writer keeps retrying a locked store before giving up (the same 60 s as the
#: busy timeout below, so a slow peer is waited for, a stuck one is reported).
LOCK_WAIT_S = 60.0
BUSY_TIMEOUT_MS = 60_000


def _locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def retry_locked(step: Callable[[], T], wait_s: float = LOCK_WAIT_S) -> T:
    """Run `step`, retrying while SQLite says the database is locked or busy."""
    deadline = time.monotonic() + wait_s
    delay = 0.005
    while True:
        try:
            return step()
        except sqlite3.OperationalError as exc:
            if not _locked(exc) or time.monotonic() > deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 0.25)


def open_connection(path: Path, write: bool) -> sqlite3.Connection:
    """A connection with the busy timeout set; for reads, fall back to read-only opens.

    A store on read-only media cannot be opened normally once it is in WAL mode (SQLite wants
    to create the -shm file); ``mode=ro`` and then ``immutable=1`` still read it.
    """
    conn = sqlite3.connect(path, timeout=LOCK_WAIT_S, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if write:
        return conn
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        last: sqlite3.Error = exc
    for query in ("mode=ro", "immutable=1"):
        uri = f"{path.resolve().as_uri()}?{query}"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=LOCK_WAIT_S, isolation_level=None)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.Error as exc:
            last = exc
    raise last


def prepare_for_writing(conn: sqlite3.Connection) -> None:
    """WAL journal and the schema, safe when many processes open a fresh store at once."""
    mode = retry_locked(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
    if mode is None or str(mode[0]).lower() != "wal":
        # Another connection may hold the file in a mode WAL cannot take over yet; the store
        # still works in rollback mode, so this is not an error.
        pass
    retry_locked(lambda: conn.executescript(SCHEMA))


def missing_columns(conn: sqlite3.Connection) -> list[str]:
    """Columns of the results table that a store written by someone else lacks."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(results)").fetchall()}
    return [c for c in COLUMNS if c not in have]
