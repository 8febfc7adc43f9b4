"""Published collective bandwidth inside one node where the GPUs talk over PCIe.

``intra_collectives.csv`` holds, per node type, op and group size, the NCCL bus bandwidth
(GB/s, nccl-tests busbw convention) and small-message latency (microseconds, one whole
collective) of GPUs without a scale-up fabric between them. A row for ``gpus = N`` applies to
groups of up to N GPUs that no smaller row covers (e.g. the 4-GPU row covers TP 2-4 inside one
CPU socket, the 8-GPU row TP 5-8 across both sockets). Unknown latency stays empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType

from flopwise.catalog._files import CatalogError, catalog_files, read_rows

_COLUMNS = ("system", "op", "gpus", "busbw_gbps", "latency_us", "source", "as_of", "note")


@dataclass(frozen=True, slots=True)
class IntraCollective:
    """NCCL busbw and latency of one collective among up to `gpus` GPUs of one node type."""

    system: str
    op: str
    gpus: int
    busbw_gbps: float
    latency_us: float | None
    source: str
    as_of: str
    note: str = ""

    def describe(self) -> str:
        lat = "latency unknown" if self.latency_us is None else f"{self.latency_us:g} us"
        return (
            f"{self.op} busbw {self.busbw_gbps:g} GB/s, {lat}, up to {self.gpus} GPUs of "
            f"{self.system} ({self.source}, as of {self.as_of})"
        )


@cache
def load_intra_collectives() -> Mapping[tuple[str, str, int], IntraCollective]:
    out: dict[tuple[str, str, int], IntraCollective] = {}
    for path in catalog_files("intra_collectives.csv"):
        for row in read_rows(path, _COLUMNS, key=("system", "op", "gpus")):
            gpus = row.integer("gpus")
            busbw = row.positive("busbw_gbps")
            assert gpus is not None and busbw is not None
            if gpus < 2:
                raise CatalogError(f"{row.where('gpus')}: a collective needs at least 2 GPUs")
            system, op = row.text("system").lower(), row.text("op").lower()
            out[(system, op, gpus)] = IntraCollective(
                system=system,
                op=op,
                gpus=gpus,
                busbw_gbps=busbw,
                latency_us=row.positive("latency_us", required=False),
                source=row.text("source"),
                as_of=row.text("as_of"),
                note=row.text("note", required=False),
            )
    return MappingProxyType(out)


def intra_collective(system: str | None, op: str, group: int) -> IntraCollective | None:
    """The row for the smallest published group of at least `group` GPUs, or None."""
    if system is None:
        return None
    rows = [
        r
        for (s, o, n), r in load_intra_collectives().items()
        if s == system.lower() and o == op and n >= group
    ]
    return min(rows, key=lambda r: r.gpus) if rows else None


def systems_with_intra_collectives() -> frozenset[str]:
    return frozenset(s for (s, _, _) in load_intra_collectives())
