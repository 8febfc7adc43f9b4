"""Cloud offers: what an instance costs, what it holds and how it is networked.

Rows come from the embedded ``offers.csv`` and, when present, the user's overlay
``$FLOPWISE_HOME/catalog/offers.csv`` (written by hand or by ``flopwise catalog refresh``).
An overlay row replaces the embedded row with the same provider, instance and region; the
embedded catalog stays the fallback for everything the overlay does not mention.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from flopwise.catalog._files import CatalogError, catalog_files, normalize_key, read_rows
from flopwise.errors import FlopwiseError, unknown

OFFER_COLUMNS: tuple[str, ...] = (
    "provider",
    "instance",
    "region",
    "accelerator",
    "gpus",
    "price_per_hour",
    "price_kind",
    "spot_price_per_hour",
    "network_gbit_s",
    "fabric",
    "local_nvme_tb",
    "shared_fs",
    "source",
    "as_of",
    "note",
)

#: What `price_per_hour` means; anything else in the file is an error naming these.
PRICE_KINDS: tuple[str, ...] = ("on_demand", "committed", "reserved", "spot")


@dataclass(frozen=True, slots=True)
class Offer:
    """One instance type at one provider and region. Prices are USD per instance-hour."""

    provider: str
    instance: str
    region: str
    accelerator: str
    gpus: int
    price_per_hour: float
    price_kind: str
    spot_price_per_hour: float | None
    network_gbit_s: float | None  # inter-node network per instance; None = not published
    fabric: str
    local_nvme_tb: float | None
    shared_fs: str
    source: str
    as_of: str
    note: str = ""
    origin: str = "embedded"  # "embedded" or the overlay file's path
    #: The date the price was published (optional column `published`); "" = unknown. `as_of`
    #: is the date the row was read, which is not the price's date.
    published: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.provider.lower(), self.instance.lower(), self.region.lower())

    @property
    def price_per_gpu_hour(self) -> float:
        return self.price_per_hour / self.gpus

    @property
    def label(self) -> str:
        return f"{self.provider} {self.instance} ({self.region})"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["price_per_gpu_hour"] = self.price_per_gpu_hour
        return d


def _offer_from_row(row: Any, origin: str) -> Offer:
    gpus = row.integer("gpus")
    price = row.number("price_per_hour")
    assert gpus is not None and price is not None
    if gpus < 1:
        raise CatalogError(f"{row.where('gpus')}: must be at least 1")
    kind = row.text("price_kind", required=False) or "on_demand"
    if kind not in PRICE_KINDS:
        raise CatalogError(
            f"{row.where('price_kind')}: {kind!r} is not one of {', '.join(PRICE_KINDS)}"
        )
    return Offer(
        provider=row.text("provider"),
        instance=row.text("instance"),
        region=row.text("region", required=False),
        accelerator=row.text("accelerator"),
        gpus=gpus,
        price_per_hour=price,
        price_kind=kind,
        spot_price_per_hour=row.number("spot_price_per_hour", required=False),
        network_gbit_s=row.number("network_gbit_s", required=False) or None,
        fabric=row.text("fabric", required=False),
        local_nvme_tb=row.number("local_nvme_tb", required=False),
        shared_fs=row.text("shared_fs", required=False),
        source=row.text("source"),
        as_of=row.text("as_of"),
        note=row.text("note", required=False),
        origin=origin,
        published=row.text("published", required=False),
    )


def read_offers_file(path: Path, origin: str | None = None) -> list[Offer]:
    """Offers of one CSV file (embedded or overlay), with file:line:field errors."""
    return [
        _offer_from_row(row, origin or str(path))
        for row in read_rows(path, OFFER_COLUMNS, key=("provider", "instance", "region"))
    ]


def load_offers() -> list[Offer]:
    """Embedded offers, then the user's overlay (same provider+instance+region replaces).

    Not cached: the file is small and `catalog refresh` may rewrite the overlay at any time.
    """
    merged: dict[tuple[str, ...], Offer] = {}
    for i, path in enumerate(catalog_files("offers.csv")):
        for offer in read_offers_file(path, "embedded" if i == 0 else str(path)):
            merged[tuple(normalize_key(k) for k in offer.key)] = offer  # case-insensitive
    return list(merged.values())


def filter_offers(
    offers: Iterable[Offer],
    *,
    accelerators: Sequence[str] | None = None,
    providers: Sequence[str] | None = None,
    max_price_per_hour: float | None = None,
) -> list[Offer]:
    """Offers for the given accelerator ids/aliases and providers, at most `max_price` $/h.

    Accelerator names resolve through the accelerator catalog (aliases work); a name that matches
    no accelerator and no offer is an error listing what is known, never an empty silent result.
    """
    pool = list(offers)
    if max_price_per_hour is not None and max_price_per_hour < 0:
        raise FlopwiseError(f"--max-price must not be negative, got {max_price_per_hour}")
    if accelerators:
        wanted = {_accelerator_id(a, pool) for a in accelerators}
        pool = [o for o in pool if o.accelerator in wanted]
    if providers:
        known = {normalize_key(o.provider) for o in load_offers()} | {
            normalize_key(o.provider) for o in pool
        }
        keys = set()
        for p in providers:
            key = normalize_key(p)
            if key not in known:
                raise unknown("provider", p, sorted(known))
            keys.add(key)
        pool = [o for o in pool if normalize_key(o.provider) in keys]
    if max_price_per_hour is not None:
        pool = [o for o in pool if o.price_per_hour <= max_price_per_hour]
    return pool


def _accelerator_id(name: str, offers: Sequence[Offer]) -> str:
    ids = {o.accelerator for o in offers}
    if name in ids:
        return name
    from flopwise.catalog.accelerators import get_accelerator

    return get_accelerator(name).id
