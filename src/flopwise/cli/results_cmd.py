"""`flopwise results list|show|export`: the stored benchmark runs."""

from __future__ import annotations

import argparse
from typing import Any

from flopwise.cli._args import add_db, add_json, positive_int


def register(sub: Any) -> None:
    p = sub.add_parser(
        "results",
        help="list, show and export stored benchmark results",
        description="Stored benchmark results (SQLite under $FLOPWISE_HOME).",
    )
    rsub = p.add_subparsers(dest="results_cmd", required=True, metavar="WHAT", parser_class=type(p))
    ls = rsub.add_parser("list", help="list stored results, newest first")
    ls.add_argument("--kind", choices=("matmul", "memory", "comms", "io"))
    ls.add_argument("--limit", type=positive_int, default=50)
    add_db(ls)
    add_json(ls)
    ls.set_defaults(func=run)
    sh = rsub.add_parser("show", help="show one stored result")
    sh.add_argument("id", type=positive_int, metavar="ID")
    add_db(sh)
    add_json(sh)
    sh.set_defaults(func=run)
    ex = rsub.add_parser("export", help="export stored results as JSON or CSV")
    ex.add_argument("--kind", choices=("matmul", "memory", "comms", "io"))
    fmt = ex.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="JSON (default)")
    fmt.add_argument("--csv", action="store_true", help="CSV, one row per result with its summary")
    add_db(ex)
    ex.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from flopwise.present import results_view
    from flopwise.results.store import ResultStore

    store = ResultStore(args.db)
    if args.results_cmd == "show":
        result = store.get(args.id)
        results_view.show_one(result, as_json=args.json)
    elif args.results_cmd == "list":
        results_view.show_list(store.list(kind=args.kind, limit=args.limit), as_json=args.json)
    else:
        results_view.export(store.list(kind=args.kind), as_csv=args.csv)
    if store.skipped:
        import sys

        sys.stderr.write(
            f"flopwise: warning: skipped {len(store.skipped)} unreadable stored result(s): "
            f"{'; '.join(store.skipped)}\n"
        )
    return 0
