"""The results store: every benchmark run with its provenance, in one SQLite file.

WAL journal and ``BEGIN IMMEDIATE`` transactions make it safe for several processes (e.g. one
per GPU) to write at once; readers never block writers.
"""

from __future__ import annotations

import json
import socket
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.results._sqlite import (
    COLUMNS,
    missing_columns,
    open_connection,
    prepare_for_writing,
    retry_locked,
)

KINDS: tuple[str, ...] = ("matmul", "memory", "comms", "io", "step", "attention", "sustained")
STATUSES: tuple[str, ...] = ("complete", "interrupted", "failed")


#: The figure `latest` needs in a run's summary for it to count as a measurement of its kind.
HEADLINE_FIGURE: dict[str, str] = {
    "matmul": "best_tflops",
    "memory": "triad_gbps",
    "attention": "fwd_tflops_inf",
}
#: How many newest runs `latest` looks through for one holding the headline figure.
LATEST_SCAN_ROWS = 200
#: SQLite integers are signed 64-bit (sqlite.org/datatype3.html): larger ids cannot exist.
MAX_SQL_INT = 2**63 - 1


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
    """A handle on the results database; cheap to create, one connection per call.

    Rows that cannot be read (non-JSON summary, missing column) are skipped and named in
    `skipped` after each read, so one bad row never hides the others.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_db_path()
        self.skipped: list[str] = []

    @contextmanager
    def _connect(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        if write:
            if self.path.is_dir():
                raise FlopwiseError(f"results store {str(self.path)!r} is a directory, not a file")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise FlopwiseError(
                    f"cannot create results folder {str(self.path.parent)!r}: {exc.strerror}"
                ) from None
        elif not self.path.exists():
            raise _Missing
        elif self.path.is_dir():
            raise FlopwiseError(f"results store {str(self.path)!r} is a directory, not a file")
        try:
            conn = open_connection(self.path, write)
        except sqlite3.Error as exc:
            raise FlopwiseError(f"cannot open results store {str(self.path)!r}: {exc}") from None
        try:
            if write:
                prepare_for_writing(conn)
            yield conn
        except sqlite3.DatabaseError as exc:
            raise FlopwiseError(f"results store {str(self.path)!r} is unusable: {exc}") from None
        finally:
            conn.close()

    def check_writable(self) -> None:
        """Raise a one-line FlopwiseError now if a result could not be added later.

        Bench commands call this before measuring, so an unusable --db costs no GPU time.
        """
        with self._connect(write=True) as conn:
            missing = missing_columns(conn)
            if missing:
                raise FlopwiseError(
                    f"results store {str(self.path)!r} is unusable: table 'results' lacks "
                    f"column(s) {', '.join(missing)}"
                )
            retry_locked(lambda: conn.execute("BEGIN IMMEDIATE"))
            conn.execute("ROLLBACK")

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
            retry_locked(lambda: conn.execute("BEGIN IMMEDIATE"))
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
            sql += f" LIMIT {min(int(limit), MAX_SQL_INT)}"
        self.skipped = []
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
        out = []
        for r in rows:
            parsed = parse_row(r)
            if isinstance(parsed, str):
                self.skipped.append(parsed)
            else:
                out.append(parsed)
        return out

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
        rows = self._rows("id = ?", (int(result_id),), 1) if 0 < result_id <= MAX_SQL_INT else []
        if not rows and self.skipped:
            raise FlopwiseError(f"stored result {self.skipped[0]}")
        if not rows:
            raise FlopwiseError(f"no stored result with id {result_id} in {str(self.path)!r}")
        return rows[0]

    def latest(
        self, kind: str, accelerator: str | None = None, status: str = "complete"
    ) -> StoredResult | None:
        """The newest complete result of a kind (for an accelerator, when given) that holds the
        kind's headline figure (HEADLINE_FIGURE); runs without it are skipped, not returned."""
        clauses = ["kind = ?", "status = ?"]
        args: list[Any] = [kind, status]
        if accelerator:
            clauses.append("accelerator = ?")
            args.append(accelerator)
        need = HEADLINE_FIGURE.get(kind)
        for row in self._rows(" AND ".join(clauses), tuple(args), LATEST_SCAN_ROWS):
            if need is None or isinstance(row.summary.get(need), (int, float)):
                return row
        return None


class _Missing(Exception):
    """The database file does not exist yet (read paths treat it as empty)."""


def parse_row(r: sqlite3.Row) -> StoredResult | str:
    """The stored result, or why the row cannot be read ('id 3: summary is not JSON')."""
    keys = set(r.keys())
    ident = r["id"] if "id" in keys else "?"
    lacking = [c for c in COLUMNS if c not in keys]
    if lacking:
        return f"id {ident}: column(s) {', '.join(lacking)} missing"
    docs = {}
    for name in ("summary", "payload"):
        try:
            value = json.loads(r[name])
        except (TypeError, ValueError):
            return f"id {ident}: {name} is not JSON"
        if not isinstance(value, dict):
            return f"id {ident}: {name} is a {type(value).__name__}, not an object"
        docs[name] = value
    return StoredResult(
        id=int(r["id"]),
        kind=str(r["kind"]),
        status=str(r["status"]),
        created_at=str(r["created_at"]),
        host=str(r["host"]),
        device=r["device"],
        device_name=r["device_name"],
        accelerator=r["accelerator"],
        summary=docs["summary"],
        payload=docs["payload"],
    )
