"""Find a Hugging Face repo's config.json in the local Hub cache, offline.

With ``huggingface_hub`` installed its own cache lookup is used (``try_to_load_from_cache``: no
network); without it the documented cache layout is read directly:
``$HF_HUB_CACHE`` or ``$HF_HOME/hub`` or ``~/.cache/huggingface/hub``, then
``models--{org}--{name}/snapshots/{revision}/config.json`` (the revision ``refs/main`` names,
else the most recently written snapshot).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from flopwise.errors import FlopwiseError

#: A Hub repo id: "org/name" (letters, digits, '-', '_', '.').
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def looks_like_repo_id(name: str) -> bool:
    return bool(REPO_ID.match(name)) and not name.endswith(".json")


def hub_cache_dir() -> Path:
    """The Hub cache folder as huggingface_hub resolves it from the environment."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HUGGINGFACE_HUB_CACHE"):
        return Path(os.environ["HUGGINGFACE_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface"
    )
    return Path(home).expanduser() / "hub"


def _from_layout(repo_id: str, cache: Path) -> Path | None:
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshots = repo / "snapshots"
    if not snapshots.is_dir():
        return None
    ref = repo / "refs" / "main"
    if ref.is_file():
        pinned = snapshots / ref.read_text(encoding="utf-8").strip() / "config.json"
        if pinned.is_file():
            return pinned
    found = [p for p in snapshots.glob("*/config.json") if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def _from_hub_library(repo_id: str, cache: Path) -> Path | None:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(repo_id, "config.json", cache_dir=str(cache))
    except Exception:  # a malformed id or cache: fall back to the layout
        return None
    return Path(found) if isinstance(found, str) and Path(found).is_file() else None


def cached_config(repo_id: str) -> Path:
    """The cached config.json of `repo_id`, or a one-line error saying how to get it."""
    cache = hub_cache_dir()
    found = _from_hub_library(repo_id, cache) or _from_layout(repo_id, cache)
    if found is not None:
        return found
    raise FlopwiseError(
        f"model {repo_id!r} is not in the catalog nor in the Hugging Face cache ({cache}); "
        f"get its config with `huggingface-cli download {repo_id} config.json` (gated repos need "
        "`huggingface-cli login` first), or pass the path of a config.json"
    )
