"""Accelerators: identity rows plus one sourced number per spec field."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from flopwise.catalog._files import CatalogError, Row, catalog_files, normalize_key, read_rows
from flopwise.errors import unknown
from flopwise.units import GB, GIB

SPEC_FIELDS: tuple[str, ...] = (
    "peak_fp64_tflops",
    "peak_fp32_tflops",
    "peak_tf32_tflops",
    "peak_bf16_tflops",
    "peak_fp16_tflops",
    "peak_fp8_tflops",
    "peak_int8_tops",
    "peak_fp4_tflops",
    "memory_gb",
    "memory_gib",
    "memory_bw_gbps",
    "compute_units",
    "l2_cache_mib",
    "clock_mhz",
    "scaleup_bw_uni_gbps",
    "scaleup_domain",
    "tdp_w",
    "mamf_bf16_tflops",
    "mamf_fp8_tflops",
    "mamf_fp4_tflops",
    "stream_bw_gbps",
)

#: dtype name -> spec field holding its dense peak. int8/int4 weights run on int8 units.
PEAK_FIELD_BY_DTYPE: Mapping[str, str] = MappingProxyType(
    {
        "fp64": "peak_fp64_tflops",
        "fp32": "peak_fp32_tflops",
        "tf32": "peak_tf32_tflops",
        "bf16": "peak_bf16_tflops",
        "fp16": "peak_fp16_tflops",
        "fp8": "peak_fp8_tflops",
        "int8": "peak_int8_tops",
        "fp4": "peak_fp4_tflops",
    }
)

MAMF_FIELD_BY_DTYPE: Mapping[str, str] = MappingProxyType(
    {
        "bf16": "mamf_bf16_tflops",
        "fp16": "mamf_bf16_tflops",
        "fp8": "mamf_fp8_tflops",
        "fp4": "mamf_fp4_tflops",
    }
)


@dataclass(frozen=True, slots=True)
class Sourced:
    """A catalog number with where it came from."""

    value: float
    source: str
    as_of: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source, "as_of": self.as_of, "note": self.note}


@dataclass(frozen=True, slots=True, eq=False)
class Accelerator:
    """One accelerator from the catalog. Unknown specs are absent, never guessed."""

    id: str
    vendor: str
    name: str
    aliases: tuple[str, ...]
    form_factor: str
    source: str
    as_of: str
    specs: Mapping[str, Sourced] = field(default_factory=dict)

    def spec(self, name: str) -> float | None:
        item = self.specs.get(name)
        return None if item is None else item.value

    def peak_tflops(self, dtype: str) -> float | None:
        """Dense peak for a dtype (bf16, fp8, ...), or None when the catalog does not know it."""
        return self.spec(PEAK_FIELD_BY_DTYPE[dtype]) if dtype in PEAK_FIELD_BY_DTYPE else None

    def mamf_tflops(self, dtype: str) -> float | None:
        """Published measured maximum achievable matmul FLOPS for a dtype, when published."""
        key = MAMF_FIELD_BY_DTYPE.get(dtype)
        return None if key is None else self.spec(key)

    @property
    def memory_bytes(self) -> float | None:
        """Device memory in bytes: the device-reported GiB when known, else the labelled GB."""
        if (g := self.spec("memory_gib")) is not None:
            return g * GIB
        if (g := self.spec("memory_gb")) is not None:
            return g * GB
        return None

    @property
    def memory_gib(self) -> float | None:
        b = self.memory_bytes
        return None if b is None else b / GIB

    @property
    def memory_bw_gbps(self) -> float | None:
        return self.spec("memory_bw_gbps")

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "vendor": self.vendor,
            "name": self.name,
            "aliases": list(self.aliases),
            "form_factor": self.form_factor,
            "source": self.source,
            "as_of": self.as_of,
            "memory_gib": self.memory_gib,
            "specs": {k: v.to_dict() for k, v in self.specs.items()},
        }


#: Fields that state the same quantity in different units: a row for one (e.g. an overlay's
#: memory_gb) replaces what an earlier file said in the other, so an override takes effect.
_SAME_QUANTITY: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"memory_gb": ("memory_gib",), "memory_gib": ("memory_gb",)}
)

_ID_COLUMNS = ("id", "vendor", "name", "aliases", "form_factor", "source", "as_of")
_SPEC_COLUMNS = ("accelerator", "field", "value", "source", "as_of", "note")


def _identity(row: Row) -> dict[str, Any]:
    ident = row.text("id")
    if ident != ident.lower() or " " in ident:
        raise CatalogError(f"{row.where('id')}: {ident!r} must be lowercase without spaces")
    return {
        "id": ident,
        "vendor": row.text("vendor"),
        "name": row.text("name"),
        "aliases": row.listed("aliases"),
        "form_factor": row.text("form_factor", required=False),
        "source": row.text("source"),
        "as_of": row.text("as_of"),
    }


@cache
def load_accelerators() -> Mapping[str, Accelerator]:
    """All accelerators, embedded rows first, user overlay rows overriding by id/field."""
    idents: dict[str, dict[str, Any]] = {}
    for path in catalog_files("accelerators.csv"):
        for row in read_rows(path, _ID_COLUMNS, key=("id",)):
            ident = _identity(row)
            idents[ident["id"]] = ident
    specs: dict[str, dict[str, Sourced]] = {k: {} for k in idents}
    from_file: dict[tuple[str, str], Path] = {}
    for path in catalog_files("accelerator_specs.csv"):
        for row in read_rows(path, _SPEC_COLUMNS, key=("accelerator", "field")):
            acc = row.text("accelerator")
            if acc not in idents:
                raise CatalogError(f"{row.where('accelerator')}: unknown accelerator {acc!r}")
            name = row.text("field")
            if name not in SPEC_FIELDS:
                raise CatalogError(
                    f"{row.where('field')}: unknown spec {name!r}; valid: {', '.join(SPEC_FIELDS)}"
                )
            value = row.positive("value")
            assert value is not None
            for same in _SAME_QUANTITY.get(name, ()):
                if from_file.get((acc, same), path) != path:
                    specs[acc].pop(same, None)  # a later file's memory_gb replaces memory_gib too
            from_file[(acc, name)] = path
            specs[acc][name] = Sourced(
                value, row.text("source"), row.text("as_of"), row.text("note", required=False)
            )
    return MappingProxyType(
        {k: Accelerator(**v, specs=MappingProxyType(specs[k])) for k, v in idents.items()}
    )


@cache
def _alias_index() -> Mapping[str, str]:
    index: dict[str, str] = {}
    for acc in load_accelerators().values():
        for name in (acc.id, acc.name, *acc.aliases):
            index.setdefault(normalize_key(name), acc.id)
    return MappingProxyType(index)


def get_accelerator(name: str) -> Accelerator:
    """Find an accelerator by id, name or alias (case-insensitive); suggest near misses."""
    key = normalize_key(name)
    found = _alias_index().get(key) or _alias_index().get(key.replace(" ", "-"))
    if found is None:
        raise unknown("accelerator", name, load_accelerators().keys())
    return load_accelerators()[found]


def longest_id_prefix(accelerator_id: str, prefixes: Iterable[str]) -> str:
    """The longest of `prefixes` that `accelerator_id` starts with ("" when none does): the
    die or family tables keyed by id prefix ("h100" for h100-sxm, "gb300" before "gb3")."""
    best = ""
    for prefix in prefixes:
        if accelerator_id.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return best
