"""Reading catalog files (embedded and user overlay) with file/line/field error reporting."""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from flopwise.errors import FlopwiseError


class CatalogError(FlopwiseError):
    """A malformed catalog row: the message names the file, line and field."""


def data_dir() -> Path:
    """The embedded catalog directory inside the installed package."""
    return Path(str(resources.files("flopwise.catalog") / "data"))


def flopwise_home() -> Path:
    """$FLOPWISE_HOME, or the platform's user data directory for flopwise."""
    env = os.environ.get("FLOPWISE_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("flopwise", appauthor=False))


def overlay_dir() -> Path:
    """Where users add or override catalog rows: $FLOPWISE_HOME/catalog."""
    return flopwise_home() / "catalog"


@dataclass(frozen=True, slots=True)
class Row:
    """One CSV row with where it came from, so errors can point at it."""

    path: Path
    line: int
    values: dict[str, str]

    def where(self, field: str) -> str:
        return f"{self.path}:{self.line}: field {field!r}"

    def text(self, field: str, required: bool = True) -> str:
        value = (self.values.get(field) or "").strip()
        if required and not value:
            raise CatalogError(f"{self.where(field)}: missing value")
        return value

    def number(self, field: str, required: bool = True) -> float | None:
        raw = self.text(field, required)
        if not raw:
            return None
        try:
            value = float(raw)
        except ValueError:
            raise CatalogError(f"{self.where(field)}: {raw!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise CatalogError(f"{self.where(field)}: {raw!r} must be a finite non-negative number")
        return value

    def positive(self, field: str, required: bool = True) -> float | None:
        """A number that must be > 0 (a zero peak or bandwidth would divide by zero later)."""
        value = self.number(field, required)
        if value is not None and value <= 0:
            raise CatalogError(
                f"{self.where(field)}: must be positive; leave the value out when unknown"
            )
        return value

    def integer(self, field: str, required: bool = True) -> int | None:
        value = self.number(field, required)
        if value is None:
            return None
        if value != int(value):
            raise CatalogError(f"{self.where(field)}: {value!r} must be a whole number")
        return int(value)

    def listed(self, field: str) -> tuple[str, ...]:
        return tuple(a.strip() for a in self.text(field, required=False).split(";") if a.strip())


def read_rows(
    path: Path, required_columns: tuple[str, ...], key: tuple[str, ...] = ()
) -> Iterator[Row]:
    """Yield rows of a CSV file with their 1-based line numbers; check the header first.

    Accepts a UTF-8 byte-order mark (as Excel writes); refuses other encodings, unterminated
    quotes and, when `key` names columns, two rows of the file with the same key (compared
    case-insensitively), each with the file and line.
    """
    if path.is_dir():
        raise CatalogError(f"{path}: is a directory, not a CSV file")
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read ({exc.strerror})") from None
    seen: dict[tuple[str, ...], int] = {}
    with handle:
        try:
            yield from _rows(path, handle, required_columns, key, seen)
        except UnicodeDecodeError as exc:
            raise CatalogError(
                f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                f"{exc.start}); save the file as UTF-8"
            ) from None


def _rows(
    path: Path,
    handle: Iterable[str],
    required_columns: tuple[str, ...],
    key: tuple[str, ...],
    seen: dict[tuple[str, ...], int],
) -> Iterator[Row]:
    reader = csv.DictReader(handle, strict=True)
    try:
        header = reader.fieldnames or []
    except csv.Error as exc:
        raise CatalogError(f"{path}:1: {exc}") from None
    missing = [c for c in required_columns if c not in header]
    if missing:
        raise CatalogError(f"{path}:1: missing column(s) {', '.join(missing)}")
    while True:
        start = reader.line_num + 1
        try:
            values = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            what = "unterminated quote" if "end of data" in str(exc) else str(exc)
            raise CatalogError(f"{path}:{start}: {what} (the row starting on this line)") from None
        if None in values:
            raise CatalogError(f"{path}:{reader.line_num}: more cells than columns")
        if not any((v or "").strip() for v in values.values()):
            continue
        row = Row(path, reader.line_num, {k: (v or "") for k, v in values.items()})
        if key:
            k = tuple(normalize_key(row.values.get(c, "")) for c in key)
            if k in seen:
                raise CatalogError(
                    f"{path}:{row.line}: duplicate {'+'.join(key)} "
                    f"{'/'.join(row.values.get(c, '') for c in key)!r} (also on line {seen[k]}; "
                    "ids are compared ignoring case)"
                )
            seen[k] = row.line
        yield row


def check_case_clash(known: Iterable[str], ident: str, row: Row, field: str = "id") -> None:
    """An overlay id that differs from a known one only in case would be a second entry."""
    for other in known:
        if other != ident and normalize_key(other) == normalize_key(ident):
            raise CatalogError(
                f"{row.where(field)}: {ident!r} differs from {other!r} only in case; spell it "
                f"{other!r} to override that entry"
            )


def catalog_files(name: str) -> list[Path]:
    """The embedded file and, when present, the user's overlay file of the same name."""
    paths = [data_dir() / name]
    overlay = overlay_dir() / name
    if overlay.is_file():
        paths.append(overlay)
    return paths


def normalize_key(name: str) -> str:
    """Case- and separator-insensitive key for matching ids and aliases."""
    return " ".join(name.strip().lower().replace("_", " ").split())
