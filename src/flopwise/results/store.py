"""The results store: every benchmark run with its provenance, in one SQLite file.

WAL journal and ``BEGIN IMMEDIATE`` transactions make it safe for several processes (e.g. one
per GPU) to write at once; readers never block writers.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from flopwise.errors import FlopwiseError

KINDS: tuple[str, ...] = ("matmul", "memory", "comms", "io", "step")
STATUSES: tuple[str, ...] = ("complete", "interrupted", "failed")

_SCHEMA = """
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


def default_db_path() -> Path:
    from flopwise.catalog._files import flopwise_home

    return flopwise_home() / "results.sqlite"


@dataclass(frozen=True, slots=True)
class StoredResult:
    """One stored benchmark run. `summary` holds the headline numbers, `payload` everything."""

    id: int
    kind: str
    status: str
    created_at: str
    host: str
    device: str | None
    device_name: str | None
    accelerator: str | None
    summary: dict[str, Any]
    payload: dict[str, Any]

    def to_dict(self, with_payload: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "status": self.status,
            "created_at": self.created_at,
            "host": self.host,
            "device": self.device,
            "device_name": self.device_name,
            "accelerator": self.accelerator,
            "summary": self.summary,
        }
        if with_payload:
            d["payload"] = self.payload
        return d


class ResultStore:
    """A handle on the results database; cheap to create, one connection per call."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_db_path()

    @contextmanager
    def _connect(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        if write:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise FlopwiseError(
                    f"cannot create results folder {str(self.path.parent)!r}: {exc.strerror}"
                ) from None
        elif not self.path.exists():
            raise _Missing
        try:
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise FlopwiseError(f"cannot open results store {str(self.path)!r}: {exc}") from None
        try:
            conn.execute("PRAGMA busy_timeout = 60000")
            if write:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.executescript(_SCHEMA)
            yield conn
        except sqlite3.DatabaseError as exc:
            raise FlopwiseError(f"results store {str(self.path)!r} is unusable: {exc}") from None
        finally:
            conn.close()

    def add(
        self,
        kind: str,
        summary: dict[str, Any],
        payload: dict[str, Any],
        *,
        status: str = "complete",
        device: str | None = None,
        device_name: str | None = None,
        accelerator: str | None = None,
        host: str | None = None,
    ) -> int:
        """Store one run atomically and return its id."""
        if kind not in KINDS:
            raise FlopwiseError(f"unknown result kind {kind!r}; valid: {', '.join(KINDS)}")
        if status not in STATUSES:
            raise FlopwiseError(f"unknown result status {status!r}; valid: {', '.join(STATUSES)}")
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        row = (
            kind,
            status,
            created,
            host or socket.gethostname(),
            device,
            device_name,
            accelerator,
            json.dumps(summary, sort_keys=True),
            json.dumps(payload, sort_keys=True),
        )
        with self._connect(write=True) as conn:
            for attempt in range(20):
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    break
                except sqlite3.OperationalError:
                    if attempt == 19:
                        raise
                    time.sleep(0.05 * (attempt + 1))
            try:
                cur = conn.execute(
                    "INSERT INTO results (kind, status, created_at, host, device, device_name, "
                    "accelerator, summary, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            assert cur.lastrowid is not None
            return int(cur.lastrowid)

    def _rows(self, where: str, args: tuple[Any, ...], limit: int | None) -> list[StoredResult]:
        sql = "SELECT * FROM results" + (f" WHERE {where}" if where else "") + " ORDER BY id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        try:
            with self._connect() as conn:
                conn.row_factory = sqlite3.Row
                try:
                    rows = conn.execute(sql, args).fetchall()
                except sqlite3.OperationalError as exc:
                    if "no such table" in str(exc):
                        return []
                    raise
        except _Missing:
            return []
        return [
            StoredResult(
                id=r["id"],
                kind=r["kind"],
                status=r["status"],
                created_at=r["created_at"],
                host=r["host"],
                device=r["device"],
                device_name=r["device_name"],
                accelerator=r["accelerator"],
                summary=json.loads(r["summary"]),
                payload=json.loads(r["payload"]),
            )
            for r in rows
        ]

    def list(
        self, kind: str | None = None, accelerator: str | None = None, limit: int | None = None
    ) -> list[StoredResult]:
        """Newest first, optionally filtered by kind and accelerator id."""
        clauses, args = [], []
        if kind:
            clauses.append("kind = ?")
            args.append(kind)
        if accelerator:
            clauses.append("accelerator = ?")
            args.append(accelerator)
        return self._rows(" AND ".join(clauses), tuple(args), limit)

    def get(self, result_id: int) -> StoredResult:
        rows = self._rows("id = ?", (int(result_id),), 1)
        if not rows:
            raise FlopwiseError(f"no stored result with id {result_id} in {str(self.path)!r}")
        return rows[0]

    def latest(
        self, kind: str, accelerator: str | None = None, status: str = "complete"
    ) -> StoredResult | None:
        """The newest complete result of a kind (for an accelerator, when given)."""
        clauses = ["kind = ?", "status = ?"]
        args: list[Any] = [kind, status]
        if accelerator:
            clauses.append("accelerator = ?")
            args.append(accelerator)
        rows = self._rows(" AND ".join(clauses), tuple(args), 1)
        return rows[0] if rows else None


class _Missing(Exception):
    """The database file does not exist yet (read paths treat it as empty)."""
