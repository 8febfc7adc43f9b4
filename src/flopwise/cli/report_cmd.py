"""`flopwise report train|infer MODEL [job flags] --out report.html`."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    from flopwise.cli.compare_cmd import add_infer_job_args, add_train_job_args
    from flopwise.cli.job_args import job_command

    p = sub.add_parser(
        "report",
        help="write a self-contained HTML report: comparison, Pareto chart, breakdowns, roofline",
        description="Compare the job like `flopwise compare` and write one self-contained HTML "
        "file (no network requests): job summary, sortable and filterable table, time-vs-cost "
        "Pareto chart, breakdowns of the top plan, roofline with measured points, benchmark "
        "history.",
    )
    rsub = p.add_subparsers(dest="compare_cmd", required=True, metavar="JOB", parser_class=type(p))
    for name, add in (("train", add_train_job_args), ("infer", add_infer_job_args)):
        q = rsub.add_parser(name, help=f"{name} report")
        add(q)
        q.add_argument(
            "--out", required=True, metavar="PATH", help="HTML file to write (e.g. report.html)"
        )
        q.set_defaults(func=job_command(run))


def run(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from flopwise.cli.compare_cmd import compare_from_args
    from flopwise.errors import FlopwiseError
    from flopwise.present.html import write_report
    from flopwise.results.store import ResultStore

    result = compare_from_args(args)
    out = Path(args.out)
    if out.is_dir():
        raise FlopwiseError(f"--out {args.out!r} is a folder; give a file name like report.html")
    written = write_report(result.to_dict(), out, store=ResultStore(args.db))
    sys.stderr.write(f"wrote {written} ({len(result.rows)} rows)\n")
    if args.json:
        from flopwise.present.jsonout import emit

        emit({"report": str(written), **result.to_dict()})
    return 0
