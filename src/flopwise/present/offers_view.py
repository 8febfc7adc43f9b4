"""Terminal view of cloud offers (every price with its publication and read dates)."""

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
            o.published or "date unknown",
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
                "published",
                "read",
            ],
            rows,
            right=(4, 5, 6),
            caption="Prices go stale: 'published' is the price's own date (unknown for catalog "
            "snapshots), 'read' the day the row was read. Sources, local NVMe and shared file "
            "systems: flopwise catalog offers --json.",
        )
    )
