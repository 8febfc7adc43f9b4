"""Reading catalog files (embedded and user overlay) with file/line/field error reporting."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
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
        if value < 0 or value != value:
            raise CatalogError(f"{self.where(field)}: {raw!r} must be a non-negative number")
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


def read_rows(path: Path, required_columns: tuple[str, ...]) -> Iterator[Row]:
    """Yield rows of a CSV file with their 1-based line numbers; check the header first."""
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read ({exc.strerror})") from None
    with handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in required_columns if c not in header]
        if missing:
            raise CatalogError(f"{path}:1: missing column(s) {', '.join(missing)}")
        for values in reader:
            if None in values:
                raise CatalogError(f"{path}:{reader.line_num}: more cells than columns")
            if not any((v or "").strip() for v in values.values()):
                continue
            yield Row(path, reader.line_num, {k: (v or "") for k, v in values.items()})


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
