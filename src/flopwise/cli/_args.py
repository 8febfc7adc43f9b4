"""Argument parsing helpers: one-line errors, shared flags and value parsers."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from flopwise.errors import FlopwiseError


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage dump) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def typed(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """Wrap a flopwise parser so argparse reports its message as the error."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except FlopwiseError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def _positive_int(text: str) -> int:
    from flopwise.units import parse_positive_int

    return parse_positive_int(text, "value")


def non_negative_int(text: str) -> int:
    """A whole number of 0 or more ('3'), else a one-line error naming the text."""
    if not text.isdigit():
        raise FlopwiseError(f"{text!r} must be a whole number, 0 or more")
    return int(text)


def _positive_float(text: str) -> float:
    from flopwise.units import parse_count

    return parse_count(text, "value")


#: argparse types: a bad value becomes "argument --gpus: value must be a positive number, got '-8'"
positive_int = typed(_positive_int)
positive_float = typed(_positive_float)


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise FlopwiseError(f"{text!r} is not a number") from None
    if value < 0 or value != value or value == float("inf"):
        raise FlopwiseError(f"{text!r} must be a non-negative number")
    return value


def fraction(text: str) -> float:
    value = non_negative_float(text)
    if not 0 < value <= 1:
        raise FlopwiseError(f"{text!r} must be a fraction in (0, 1], e.g. 0.4")
    return value


def spread(text: str) -> float:
    """A relative spread in [0, 1) (--output-spread)."""
    value = non_negative_float(text)
    if not value < 1:
        raise FlopwiseError(f"{text!r}: give a number in [0, 1), e.g. 0.11")
    return value


def batch_sizes(text: str) -> tuple[int, ...]:
    """A comma-separated list of positive batch sizes, returned sorted without repeats
    (--cuda-graph-batch-sizes 1,2,4,8)."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items or not all(t.isdigit() and int(t) >= 1 for t in items):
        raise FlopwiseError(
            f"{text!r}: give positive batch sizes separated by commas, e.g. 1,2,4,8"
        )
    return tuple(sorted({int(t) for t in items}))


def tokens(text: str) -> float:
    from flopwise.units import parse_count

    return parse_count(text, "token count")


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document and nothing else")


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db", metavar="PATH", help="results database (default: $FLOPWISE_HOME/results.sqlite)"
    )


def add_device(p: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup) -> None:
    """The device a bench command measures, the same flag and help in every bench command."""
    p.add_argument(
        "--device",
        default="auto",
        metavar="DEV",
        help="auto|cpu|cuda[:i]|xpu[:i]|hpu[:i]|mps (default auto: the accelerator if present)",
    )


def add_bench_outputs(p: argparse.ArgumentParser, *, out: bool = True) -> None:
    """Where a bench command's measurement goes: --out FILE (a copy of the JSON document, where
    the command writes one), --json and --db, the same flags and help in every bench command."""
    if out:
        p.add_argument("--out", metavar="FILE", help="also write the JSON document to FILE")
    add_json(p)
    add_db(p)
