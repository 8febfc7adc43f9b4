"""`flopwise catalog accelerators|systems|models` (offers and refresh: cli/offers_cmd.py)."""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli._args import add_json


def register(sub: Any) -> None:
    p = sub.add_parser(
        "catalog",
        help="list the embedded catalog (accelerators, systems, models, offers)",
        description="List the embedded catalog. Rows in $FLOPWISE_HOME/catalog/ add to or "
        "override embedded rows with the same id.",
    )
    csub = p.add_subparsers(dest="catalog_cmd", required=True, metavar="WHAT", parser_class=type(p))
    for name, help_ in (
        ("accelerators", "accelerators with dense peaks, memory, links, MAMF and sources"),
        ("systems", "node types: GPUs per node, scale-up fabric, scale-out network"),
        ("models", "models (Hugging Face config.json) with parameter counts"),
    ):
        q = csub.add_parser(name, help=help_, description=help_)
        add_json(q)
        q.set_defaults(func=run)
    from flopwise.cli.offers_cmd import register_offers

    register_offers(csub)


def run(args: argparse.Namespace) -> int:
    from flopwise.catalog import load_accelerators, load_model_index, load_systems

    what = args.catalog_cmd
    if what == "accelerators":
        accs = list(load_accelerators().values())
        if args.json:
            from flopwise.present.jsonout import emit

            emit({"accelerators": [a.to_dict() for a in accs]})
        else:
            from flopwise.present.catalog_view import show_accelerators

            show_accelerators(accs)
    elif what == "systems":
        systems = list(load_systems().values())
        if args.json:
            from flopwise.present.jsonout import emit

            emit({"systems": [s.to_dict() for s in systems]})
        else:
            from flopwise.present.catalog_view import show_systems

            show_systems(systems)
    else:
        from flopwise.catalog.models import read_config_file
        from flopwise.workload.hf import spec_from_config
        from flopwise.workload.params import count_params

        rows = []
        for entry in load_model_index().values():
            if entry.id.startswith("pub-"):
                continue  # architectures of published runs (flopwise validate), not models
            spec = spec_from_config(entry.id, read_config_file(entry.config_path))
            rows.append((entry, spec, count_params(spec)))
        if args.json:
            from flopwise.present.jsonout import emit

            emit(
                {
                    "models": [
                        {
                            **e.to_dict(),
                            "model_type": s.model_type,
                            "params": c.total,
                            "active_params": c.active,
                            "max_seq_len": s.max_seq_len,
                        }
                        for e, s, c in rows
                    ]
                }
            )
        else:
            from flopwise.present.catalog_view import show_models

            show_models(rows)
    return 0
