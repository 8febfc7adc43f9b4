"""Catalog data for goodput: interruption causes, storage tiers, device-to-host links.

- ``failures.csv``: interruptions observed on a published run, by cause, with the job size and
  duration they were observed over, so each cause becomes a rate per GPU-day or per node-day.
  Users may pass their own cluster's file of the same columns (``--failure-data``).
- ``storage.csv``: file-system tiers: per-node and aggregate (file-system cap) GB/s.
- ``host_links.csv``: device-to-host copy bandwidth per accelerator (the async snapshot path).
All three accept user overlay rows in $FLOPWISE_HOME/catalog, like the other catalog files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from flopwise.catalog._files import CatalogError, catalog_files, read_rows
from flopwise.errors import FlopwiseError, unknown

#: The failure profile `plan train` uses unless told otherwise.
DEFAULT_FAILURE_PROFILE = "llama3-405b"

_FAILURE_COLUMNS = (
    "profile",
    "cause",
    "category",
    "kind",
    "scales_with",
    "count",
    "observed_days",
    "observed_gpus",
    "observed_nodes",
    "source",
    "as_of",
)
_STORAGE_COLUMNS = (
    "id",
    "name",
    "write_gbps_per_node",
    "read_gbps_per_node",
    "aggregate_write_gbps",
    "aggregate_read_gbps",
    "source",
    "as_of",
)
_LINK_COLUMNS = ("accelerator", "host_link", "d2h_gbps", "source", "as_of")
KINDS = ("unexpected", "planned")
SCALES = ("gpu", "node")


@dataclass(frozen=True, slots=True)
class FailureCause:
    """One cause of job interruptions and the rate it was observed at."""

    profile: str
    cause: str
    category: str
    kind: str  # "unexpected" (lose work since the last checkpoint) | "planned"
    scales_with: str  # "gpu" | "node"
    count: float
    observed_days: float
    observed_gpus: int
    observed_nodes: int
    source: str
    as_of: str

    @property
    def per_unit_day(self) -> float:
        """Interruptions per GPU-day (scales_with gpu) or per node-day (node)."""
        units = self.observed_gpus if self.scales_with == "gpu" else self.observed_nodes
        return self.count / (self.observed_days * units)

    def per_day(self, gpus: int, nodes: int) -> float:
        """Expected interruptions per day for a job of `gpus` GPUs on `nodes` nodes."""
        return self.per_unit_day * (gpus if self.scales_with == "gpu" else nodes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cause": self.cause,
            "category": self.category,
            "kind": self.kind,
            "scales_with": self.scales_with,
            "per_unit_day": self.per_unit_day,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class StorageTier:
    """A file system as checkpoints see it; None = not published."""

    id: str
    name: str
    write_gbps_per_node: float | None
    read_gbps_per_node: float | None
    aggregate_write_gbps: float | None
    aggregate_read_gbps: float | None
    source: str
    as_of: str
    note: str = ""


def _failure_rows(path: Path) -> list[FailureCause]:
    out = []
    for row in read_rows(path, _FAILURE_COLUMNS):
        kind = row.text("kind")
        scales = row.text("scales_with")
        if kind not in KINDS:
            raise CatalogError(f"{row.where('kind')}: {kind!r} is not one of {', '.join(KINDS)}")
        if scales not in SCALES:
            raise CatalogError(
                f"{row.where('scales_with')}: {scales!r} is not one of {', '.join(SCALES)}"
            )
        days, gpus, nodes = (
            row.number("observed_days"),
            row.integer("observed_gpus"),
            row.integer("observed_nodes"),
        )
        count = row.number("count")
        assert days is not None and gpus is not None and nodes is not None and count is not None
        if days <= 0 or gpus < 1 or nodes < 1:
            raise CatalogError(f"{row.where('observed_days')}: days, GPUs and nodes must be > 0")
        out.append(
            FailureCause(
                profile=row.text("profile"),
                cause=row.text("cause"),
                category=row.text("category"),
                kind=kind,
                scales_with=scales,
                count=count,
                observed_days=days,
                observed_gpus=gpus,
                observed_nodes=nodes,
                source=row.text("source"),
                as_of=row.text("as_of"),
            )
        )
    return out


@cache
def load_failure_causes() -> tuple[FailureCause, ...]:
    rows: list[FailureCause] = []
    for path in catalog_files("failures.csv"):
        rows.extend(_failure_rows(path))
    return tuple(rows)


def failure_profiles() -> tuple[str, ...]:
    return tuple(dict.fromkeys(c.profile for c in load_failure_causes()))


def failure_causes(profile: str = DEFAULT_FAILURE_PROFILE) -> tuple[FailureCause, ...]:
    """The causes of one catalog profile (e.g. 'llama3-405b')."""
    found = tuple(c for c in load_failure_causes() if c.profile == profile)
    if not found:
        raise unknown("failure profile", profile, failure_profiles())
    return found


def failure_causes_from_file(path: str) -> tuple[FailureCause, ...]:
    """A user's own cluster log, same columns as the catalog's failures.csv."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise FlopwiseError(f"--failure-data {path!r} is not a file; give a CSV like failures.csv")
    rows = _failure_rows(p)
    if not rows:
        raise FlopwiseError(f"--failure-data {path!r} has no rows")
    return tuple(rows)


@cache
def load_storage_tiers() -> Mapping[str, StorageTier]:
    out: dict[str, StorageTier] = {}
    for path in catalog_files("storage.csv"):
        for row in read_rows(path, _STORAGE_COLUMNS):
            ident = row.text("id").lower()
            out[ident] = StorageTier(
                id=ident,
                name=row.text("name"),
                write_gbps_per_node=row.number("write_gbps_per_node", required=False),
                read_gbps_per_node=row.number("read_gbps_per_node", required=False),
                aggregate_write_gbps=row.number("aggregate_write_gbps", required=False),
                aggregate_read_gbps=row.number("aggregate_read_gbps", required=False),
                source=row.text("source"),
                as_of=row.text("as_of"),
                note=row.text("note", required=False),
            )
    return MappingProxyType(out)


def get_storage_tier(name: str) -> StorageTier:
    tier = load_storage_tiers().get(name.strip().lower())
    if tier is None:
        raise unknown("storage tier", name, load_storage_tiers().keys())
    return tier


@cache
def _links() -> Mapping[str, tuple[float, str]]:
    out: dict[str, tuple[float, str]] = {}
    for path in catalog_files("host_links.csv"):
        for row in read_rows(path, _LINK_COLUMNS):
            gbps = row.number("d2h_gbps")
            assert gbps is not None
            out[row.text("accelerator").lower()] = (
                gbps,
                f"{row.text('host_link')}: {row.text('source')} (as of {row.text('as_of')})",
            )
    return MappingProxyType(out)


def host_link_gbps(accelerator_id: str) -> tuple[float, str] | None:
    """(device-to-host GB/s, source) for an accelerator, None when the catalog has none."""
    return _links().get(accelerator_id.lower())


def summarize(causes: Sequence[FailureCause]) -> dict[str, Any]:
    """Where a set of causes came from, for the plan's JSON."""
    return {
        "profiles": sorted({c.profile for c in causes}),
        "sources": sorted({c.source for c in causes}),
        "causes": len(causes),
    }
