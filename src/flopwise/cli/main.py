"""Entry point: build the parser from the command modules and turn errors into one line."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import import_module

from flopwise import __version__
from flopwise.cli._args import Parser

#: Command modules in the order `flopwise --help` lists them. Each has register(subparsers).
COMMAND_MODULES: tuple[str, ...] = (
    "flopwise.cli.catalog_cmd",
    "flopwise.cli.model_cmd",
    "flopwise.cli.plan_cmd",
    "flopwise.cli.validate_cmd",
    "flopwise.cli.bench_cmd",
    "flopwise.cli.check_cmd",
    "flopwise.cli.results_cmd",
    "flopwise.cli.compare_cmd",
    "flopwise.cli.report_cmd",
)


def build_parser() -> Parser:
    parser = Parser(
        prog="flopwise",
        description="The truth about accelerator compute: measure what a machine delivers, "
        "plan LLM training and inference, compare accelerators and offers.",
    )
    parser.add_argument("--version", action="version", version=f"flopwise {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    for name in COMMAND_MODULES:
        import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from flopwise.errors import FlopwiseError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except FlopwiseError as exc:
        sys.stderr.write(f"flopwise: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("flopwise: interrupted\n")
        return 130
    except BrokenPipeError:  # `| head` closed stdout: that reader has all it wanted
        from flopwise.cli._signals import silence_stdout

        silence_stdout()
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
