"""A stored `bench io` run as checkpoint storage: `--measured [ID|latest]` for goodput.

`bench io` stores ``{"write_gbps", "read_gbps", "files_per_s", "path", "writers"}`` (kind
``io``, no accelerator: storage belongs to the node, not to a GPU). It measures one node, so
its rates are per node; the job's aggregate is nodes x that, capped by a file-system tier when
one is given.
"""

from __future__ import annotations

from flopwise.results.store import ResultStore, StoredResult


def latest_io(selector: str = "latest", db: str | None = None) -> StoredResult | None:
    """The io result `selector` names (an id of an io run), else the newest complete one."""
    store = ResultStore(db)
    if selector != "latest":
        try:
            pinned = store.get(int(selector))
        except ValueError:
            pinned = None
        if pinned is not None and pinned.kind == "io" and pinned.status == "complete":
            return pinned
    return store.latest("io")


def io_rates(result: StoredResult) -> tuple[float | None, float | None, str]:
    """(write GB/s per node, read GB/s per node, where they came from)."""
    s = result.summary

    def rate(key: str) -> float | None:
        v = s.get(key)
        return float(v) if isinstance(v, (int, float)) and v > 0 else None

    where = (
        f"measured: bench io result {result.id} ({result.created_at}, {result.host}, "
        f"{s.get('path', '?')}, {s.get('writers', '?')} writers), per node"
    )
    return rate("write_gbps"), rate("read_gbps"), where
