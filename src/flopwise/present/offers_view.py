"""Terminal view of cloud offers (every price with its as-of date)."""

from __future__ import annotations

from collections.abc import Sequence

from flopwise.catalog.offers import Offer
from flopwise.present.console import console, fmt_num, table


def _network(o: Offer) -> str:
    if o.network_gbit_s is None:
        return "unknown"
    return f"{fmt_num(o.network_gbit_s, 0)} Gb/s {o.fabric}".strip()


def show_offers(offers: Sequence[Offer]) -> None:
    rows = [
        (
            o.provider,
            o.instance,
            o.region,
            f"{o.gpus} x {o.accelerator}",
            f"{o.price_per_hour:,.2f}"
            + ("" if o.price_kind == "on_demand" else f" ({o.price_kind})"),
            f"{o.price_per_gpu_hour:,.2f}",
            "—" if o.spot_price_per_hour is None else f"{o.spot_price_per_hour:,.2f}",
            _network(o),
            o.as_of,
        )
        for o in offers
    ]
    console().print(
        table(
            f"Cloud offers ({len(rows)})",
            [
                "provider",
                "instance",
                "region",
                "GPUs",
                "$/hour",
                "$/GPU-hour",
                "spot $/hour",
                "network",
                "price as of",
            ],
            rows,
            right=(4, 5, 6),
            caption="Prices go stale: check the as-of date. Sources, local NVMe and shared "
            "file systems: flopwise catalog offers --json.",
        )
    )
