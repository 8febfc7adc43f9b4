"""The model catalog: Hugging Face style config.json files plus an index of ids and aliases."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from flopwise.catalog._files import (
    CatalogError,
    check_case_clash,
    data_dir,
    normalize_key,
    overlay_dir,
    read_rows,
)
from flopwise.errors import FlopwiseError, unknown

_COLUMNS = ("id", "hf_repo", "aliases", "config", "source", "as_of", "note")


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """One catalog model: where its config.json lives and where it came from."""

    id: str
    hf_repo: str
    aliases: tuple[str, ...]
    config_path: Path
    source: str
    as_of: str
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "hf_repo": self.hf_repo,
            "aliases": list(self.aliases),
            "source": self.source,
            "as_of": self.as_of,
            "note": self.note,
        }


@cache
def load_model_index() -> Mapping[str, ModelEntry]:
    out: dict[str, ModelEntry] = {}
    # published/models: architectures of published runs that no stock catalog model matches
    # (ids pub-*), the models `flopwise validate` poses its rows with
    for folder in (
        data_dir() / "models",
        data_dir() / "published" / "models",
        overlay_dir() / "models",
    ):
        index = folder / "index.csv"
        if not index.is_file():
            continue
        for row in read_rows(index, _COLUMNS, key=("id",)):
            ident = row.text("id")
            check_case_clash(out, ident, row)
            config = folder / row.text("config")
            if not config.is_file():
                raise CatalogError(f"{row.where('config')}: no such file {config}")
            out[ident] = ModelEntry(
                id=ident,
                hf_repo=row.text("hf_repo", required=False),
                aliases=row.listed("aliases"),
                config_path=config,
                source=row.text("source"),
                as_of=row.text("as_of"),
                note=row.text("note", required=False),
            )
    return MappingProxyType(out)


@cache
def _alias_index() -> Mapping[str, str]:
    index: dict[str, str] = {}
    for entry in load_model_index().values():
        for name in (entry.id, entry.hf_repo, *entry.aliases):
            if name:
                index.setdefault(normalize_key(name), entry.id)
    return MappingProxyType(index)


def find_model_entry(name: str) -> ModelEntry | None:
    found = _alias_index().get(normalize_key(name))
    return None if found is None else load_model_index()[found]


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a config.json (or a directory holding one) into a dict, with a one-line error."""
    if path.is_dir():
        path = path / "config.json"
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise FlopwiseError(f"cannot read model config {str(path)!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise FlopwiseError(
            f"model config {str(path)!r} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} "
            f"at offset {exc.start}); config.json files are UTF-8 JSON"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FlopwiseError(
            f"malformed config.json {str(path)!r}: line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    if not isinstance(data, dict):
        raise FlopwiseError(f"malformed config.json {str(path)!r}: top level must be an object")
    return data


def resolve_model_config(name: str) -> tuple[str, dict[str, Any], ModelEntry | None]:
    """A catalog id/alias/HF repo name or a path to a config.json -> (name, config, entry)."""
    entry = find_model_entry(name)
    if entry is not None:
        return entry.id, read_config_file(entry.config_path), entry
    path = Path(name).expanduser()
    if not path.exists():
        from flopwise.catalog.hf_cache import cached_config, looks_like_repo_id

        if looks_like_repo_id(name):
            return name, read_config_file(cached_config(name)), None
    if path.exists() or name.endswith(".json") or ("/" in name and path.suffix):
        if not path.exists():
            raise FlopwiseError(f"model config {name!r} does not exist")
        return path.stem if path.is_file() else path.name, read_config_file(path), None
    raise unknown("model", name, load_model_index().keys())
