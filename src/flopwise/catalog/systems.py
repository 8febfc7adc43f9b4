"""Node types: how many accelerators, the scale-up fabric and the scale-out network."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import cache
from types import MappingProxyType
from typing import Any

from flopwise.catalog._files import CatalogError, catalog_files, normalize_key, read_rows
from flopwise.errors import unknown

_COLUMNS = (
    "id",
    "name",
    "accelerator",
    "gpus_per_node",
    "intra_fabric",
    "intra_bw_uni_gbps",
    "scaleup_domain",
    "inter_fabric",
    "nics_per_node",
    "nic_gbit_s",
    "aliases",
    "source",
    "as_of",
    "note",
)


@dataclass(frozen=True, slots=True)
class System:
    """A node type. Bandwidths: scale-up per GPU per direction (GB/s); NICs in Gb/s."""

    id: str
    name: str
    accelerator: str
    gpus_per_node: int
    intra_fabric: str
    intra_bw_uni_gbps: float
    scaleup_domain: int
    inter_fabric: str
    nics_per_node: int
    nic_gbit_s: float
    aliases: tuple[str, ...]
    source: str
    as_of: str
    note: str = ""

    @property
    def inter_bw_per_gpu_gbps(self) -> float:
        """Scale-out bandwidth per GPU per direction in GB/s (bits / 8)."""
        return self.nics_per_node * self.nic_gbit_s / 8.0 / self.gpus_per_node

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["aliases"] = list(self.aliases)
        d["inter_bw_per_gpu_gbps"] = self.inter_bw_per_gpu_gbps
        return d


@cache
def load_systems() -> Mapping[str, System]:
    out: dict[str, System] = {}
    for path in catalog_files("systems.csv"):
        for row in read_rows(path, _COLUMNS, key=("id",)):
            ident = row.text("id")
            if ident != ident.lower():
                raise CatalogError(f"{row.where('id')}: {ident!r} must be lowercase")
            gpus = row.integer("gpus_per_node")
            domain = row.integer("scaleup_domain")
            nics = row.integer("nics_per_node", required=False)
            assert gpus is not None and domain is not None
            if gpus < 1:
                raise CatalogError(f"{row.where('gpus_per_node')}: must be at least 1")
            out[ident] = System(
                id=ident,
                name=row.text("name"),
                accelerator=row.text("accelerator"),
                gpus_per_node=gpus,
                intra_fabric=row.text("intra_fabric", required=False),
                intra_bw_uni_gbps=row.number("intra_bw_uni_gbps") or 0.0,
                scaleup_domain=domain,
                inter_fabric=row.text("inter_fabric", required=False),
                nics_per_node=nics or 0,
                nic_gbit_s=row.number("nic_gbit_s", required=False) or 0.0,
                aliases=row.listed("aliases"),
                source=row.text("source"),
                as_of=row.text("as_of"),
                note=row.text("note", required=False),
            )
    return MappingProxyType(out)


def get_system(name: str) -> System:
    key = normalize_key(name)
    system = _by_key().get(key)
    if system is None:
        raise unknown("system", name, load_systems().keys())
    return system


@cache
def _by_key() -> Mapping[str, System]:
    """Every system by each of its normalised names (first in catalog order wins)."""
    out: dict[str, System] = {}
    for system in load_systems().values():
        for n in (system.id, system.name, *system.aliases):
            out.setdefault(normalize_key(n), system)
    return MappingProxyType(out)


def systems_for(accelerator_id: str) -> list[System]:
    """Node types built from this accelerator, in catalog order."""
    return [s for s in load_systems().values() if s.accelerator == accelerator_id]
