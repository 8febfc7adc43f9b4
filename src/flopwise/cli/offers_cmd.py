"""`flopwise catalog offers` and `flopwise catalog refresh --from gpuhunt`."""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli._args import add_json, non_negative_float, typed


def _csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def register_offers(csub: Any) -> None:
    q = csub.add_parser(
        "offers",
        help="cloud offers: instance, GPUs, $/hour (with as-of date), network, storage",
        description="Cloud offers from the embedded catalog and your overlay "
        "($FLOPWISE_HOME/catalog/offers.csv). Prices go stale: every price shows its as-of date.",
    )
    q.add_argument(
        "--accelerator",
        action="append",
        type=_csv_list,
        metavar="ID",
        help="only offers of this accelerator (id or alias; repeat or comma-separate)",
    )
    q.add_argument(
        "--provider",
        action="append",
        type=_csv_list,
        metavar="NAME",
        help="only offers of this provider (repeat or comma-separate)",
    )
    q.add_argument(
        "--max-price",
        type=typed(non_negative_float),
        metavar="USD",
        help="only offers at most this many dollars per instance-hour",
    )
    add_json(q)
    q.set_defaults(func=run_offers)

    r = csub.add_parser(
        "refresh",
        help="fetch current prices into your overlay (the only command that uses the network)",
        description="Fetch current offers and write $FLOPWISE_HOME/catalog/offers.csv atomically. "
        "The embedded catalog stays the fallback. A file you edited is never overwritten: "
        "refresh refuses and says so.",
    )
    r.add_argument(
        "--from",
        dest="source",
        required=True,
        choices=("gpuhunt",),
        help="where to fetch from (gpuhunt: pip install 'flopwise[refresh]')",
    )
    add_json(r)
    r.set_defaults(func=run_refresh)


def _flat(groups: list[list[str]] | None) -> list[str] | None:
    return None if not groups else [x for g in groups for x in g]


def run_offers(args: argparse.Namespace) -> int:
    from flopwise.catalog.offers import filter_offers, load_offers

    offers = filter_offers(
        load_offers(),
        accelerators=_flat(args.accelerator),
        providers=_flat(args.provider),
        max_price_per_hour=args.max_price,
    )
    offers.sort(key=lambda o: (o.price_per_gpu_hour, o.provider, o.instance))
    if args.json:
        from flopwise.present.jsonout import emit

        emit({"offers": [o.to_dict() for o in offers]})
    else:
        from flopwise.present.offers_view import show_offers

        show_offers(offers)
    return 0


def run_refresh(args: argparse.Namespace) -> int:
    from flopwise.catalog.refresh import refresh_offers

    result = refresh_offers(args.source)
    if args.json:
        from flopwise.present.jsonout import emit

        emit(result.to_dict())
    else:
        from flopwise.present.console import console

        console().print(
            f"wrote {result.offers} offers from {result.source} (as of {result.as_of}) to "
            f"{result.path}; {result.skipped} rows skipped (accelerator not in the catalog or no "
            "price). The embedded catalog still covers everything else."
        )
    return 0
