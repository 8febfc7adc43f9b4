"""Where a job could run: cloud offers, or catalog systems priced per GPU-hour."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from flopwise.catalog.offers import Offer, filter_offers, load_offers
from flopwise.catalog.systems import System, get_system, systems_for
from flopwise.errors import FlopwiseError


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    """One place to run: an instance type with its price (None = unknown) and its network."""

    provider: str
    instance: str
    region: str
    accelerator: str
    gpus_per_instance: int
    price_per_hour: float | None  # per instance
    price_kind: str
    price_as_of: str | None  # the date the price was read
    price_source: str | None
    network_gbit_s: float | None  # per instance, as offered; None = not published
    fabric: str
    system_id: str | None  # catalog node type the planner describes the hardware with
    offer: Offer | None = None
    price_published: str | None = None  # the date the price was published, when known

    @property
    def label(self) -> str:
        region = f" ({self.region})" if self.region else ""
        return f"{self.provider} {self.instance}{region}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "instance": self.instance,
            "region": self.region,
            "accelerator": self.accelerator,
            "gpus_per_instance": self.gpus_per_instance,
            "price_per_hour": self.price_per_hour,
            "price_per_gpu_hour": None
            if self.price_per_hour is None
            else self.price_per_hour / self.gpus_per_instance,
            "price_kind": self.price_kind,
            "price_as_of": self.price_as_of,
            "price_published": self.price_published,
            "price_source": self.price_source,
            "offer_network_gbit_s": self.network_gbit_s,
            "fabric": self.fabric,
            "system": self.system_id,
        }


def _system_for(accelerator: str) -> System | None:
    found = systems_for(accelerator)
    return found[0] if found else None


def from_offers(
    *,
    accelerators: Sequence[str] | None = None,
    providers: Sequence[str] | None = None,
    max_price_per_hour: float | None = None,
    spot: bool = False,
) -> list[Candidate]:
    """Every catalog offer (embedded + overlay), optionally filtered. With `spot`, offers are
    priced at their published spot price and those without one are left out."""
    out = []
    pool = load_offers()
    if spot:
        pool = [
            replace(o, price_per_hour=o.spot_price_per_hour, price_kind="spot")
            for o in pool
            if o.spot_price_per_hour
        ]
    for o in filter_offers(
        pool,
        accelerators=accelerators,
        providers=providers,
        max_price_per_hour=max_price_per_hour,
    ):
        system = _system_for(o.accelerator)
        out.append(
            Candidate(
                provider=o.provider,
                instance=o.instance,
                region=o.region,
                accelerator=o.accelerator,
                gpus_per_instance=o.gpus,
                price_per_hour=o.price_per_hour,
                price_kind=o.price_kind,
                price_as_of=o.as_of,
                price_published=o.published or None,
                price_source=o.source,
                network_gbit_s=o.network_gbit_s,
                fabric=o.fabric,
                system_id=None if system is None else system.id,
                offer=o,
            )
        )
    return out


def from_accelerators(
    names: Sequence[str], price_per_gpu_hour: float | None = None
) -> list[Candidate]:
    """One candidate per accelerator (or system id): its catalog node type, priced either at
    `price_per_gpu_hour` or at the cheapest catalog offer's $/GPU-hour (with that offer's date)."""
    from flopwise.catalog.accelerators import get_accelerator

    if price_per_gpu_hour is not None and price_per_gpu_hour < 0:
        raise FlopwiseError(f"--price-per-gpu-hour must not be negative, got {price_per_gpu_hour}")
    offers = load_offers()
    out = []
    for name in names:
        try:
            system: System | None = get_system(name)
            assert system is not None
            acc_id = system.accelerator
        except FlopwiseError:
            acc_id = get_accelerator(name).id
            system = _system_for(acc_id)
        gpn = system.gpus_per_node if system else 1
        price = kind = as_of = source = published = None
        if price_per_gpu_hour is not None:
            price, kind, as_of, source = (
                price_per_gpu_hour * gpn,
                "given",
                None,
                "--price-per-gpu-hour",
            )
        else:
            mine = [o for o in offers if o.accelerator == acc_id]
            if mine:
                best = min(mine, key=lambda o: o.price_per_gpu_hour)
                price = best.price_per_gpu_hour * gpn
                kind, as_of, published = best.price_kind, best.as_of, best.published or None
                source = f"cheapest catalog offer: {best.provider} {best.instance} ({best.source})"
        out.append(
            Candidate(
                provider="catalog",
                instance=system.id if system else acc_id,
                region="",
                accelerator=acc_id,
                gpus_per_instance=gpn,
                price_per_hour=price,
                price_kind=kind or "unknown",
                price_as_of=as_of,
                price_published=published,
                price_source=source,
                network_gbit_s=(system.nics_per_node * system.nic_gbit_s) or None
                if system
                else None,
                fabric=system.inter_fabric if system else "",
                system_id=system.id if system else None,
            )
        )
    return out
