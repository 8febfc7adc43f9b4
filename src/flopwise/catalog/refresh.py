"""`flopwise catalog refresh --from gpuhunt`: fresh prices into the user's overlay, safely.

The only part of flopwise that may use the network. It writes
``$FLOPWISE_HOME/catalog/offers.csv`` atomically (temporary file in the same folder, fsync,
``os.replace``) and records the SHA-256 of what it wrote in a sidecar
``.offers.csv.flopwise.json``. Before writing it checks that sidecar: if the overlay exists and
flopwise did not write it (no sidecar) or it changed since (hash differs), the user edited it and
refresh refuses with a one-line message instead of overwriting their rows. The embedded catalog
is untouched and stays the fallback for every offer the overlay does not list.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import math
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from flopwise.catalog._files import overlay_dir
from flopwise.catalog.offers import OFFER_COLUMNS, Offer, load_offers, read_offers_file
from flopwise.errors import FlopwiseError

SOURCES: tuple[str, ...] = ("gpuhunt",)
GPUHUNT_URL = "https://github.com/dstackai/gpuhunt"
SIDECAR_SUFFIX = ".flopwise.json"

#: A catalog accelerator matches a gpuhunt row only when its memory is within this fraction of
#: the row's per-GPU memory (gpuhunt quotes e.g. 80 GB for A100 80GB, 141 for H200).
_MEMORY_TOLERANCE = 0.15

#: Fetches items with gpuhunt's CatalogItem attributes (provider, instance_name, location,
#: price, gpu_count, gpu_name, gpu_memory, spot).
Fetcher = Callable[[], Iterable[Any]]


@dataclass(frozen=True, slots=True)
class RefreshResult:
    path: Path
    sidecar: Path
    offers: int
    skipped: int
    source: str
    as_of: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "sidecar": str(self.sidecar),
            "offers": self.offers,
            "skipped": self.skipped,
            "source": self.source,
            "as_of": self.as_of,
        }


def sidecar_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{SIDECAR_SUFFIX}")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_not_user_edited(path: Path) -> None:
    """Refuse when `path` exists and is not byte-for-byte what flopwise last wrote there."""
    if not path.exists():
        return
    if not path.is_file():
        raise FlopwiseError(
            f"{path} is not a file; move it aside and run `flopwise catalog refresh` again"
        )
    side = sidecar_path(path)
    try:
        recorded = json.loads(side.read_text(encoding="utf-8")).get("sha256")
    except (OSError, ValueError, AttributeError):
        recorded = None
    try:
        current = _sha256(path.read_bytes())
    except OSError as exc:
        raise FlopwiseError(f"cannot read {path}: {exc.strerror or exc}") from None
    if recorded != current:
        why = (
            "was not written by flopwise"
            if recorded is None
            else "was edited since flopwise wrote it"
        )
        raise FlopwiseError(
            f"{path} {why}; not overwriting your rows. Move it aside (or delete it) and run "
            "`flopwise catalog refresh` again"
        )


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def gpuhunt_fetch() -> list[Any]:
    """All GPU offers from gpuhunt (imported lazily: it is the optional `refresh` extra)."""
    try:
        import gpuhunt
    except ImportError:
        raise FlopwiseError(
            "catalog refresh --from gpuhunt needs the optional extra: "
            "pip install 'flopwise[refresh]' (the embedded catalog is still used)"
        ) from None
    # gpuhunt logs a traceback per provider it cannot reach; the one-line error below says it.
    quiet = logging.getLogger("gpuhunt")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL + 1)
    try:
        return list(gpuhunt.query(min_gpu_count=1))
    except Exception as exc:  # gpuhunt raises GPUHuntError/urllib errors when offline
        first = (str(exc).splitlines() or [""])[0][:160]
        raise FlopwiseError(
            f"could not fetch the gpuhunt catalog (offline or blocked?): "
            f"{type(exc).__name__}: {first}; nothing was written, the embedded catalog is "
            "still used"
        ) from None
    finally:
        quiet.setLevel(level)


def _gpuhunt_version() -> str:
    try:
        from importlib.metadata import version

        return version("gpuhunt")
    except Exception:
        return "unknown"


def map_accelerator(gpu_name: str | None, gpu_memory_gb: float | None, instance: str) -> str | None:
    """Catalog accelerator id for a gpuhunt row, or None when no catalog entry fits it."""
    from flopwise.catalog.accelerators import get_accelerator

    if not gpu_name:
        return None
    names = []
    if "pcie" in instance.lower():
        names.append(f"{gpu_name} PCIe")
    if gpu_memory_gb:
        names.append(f"{gpu_name}-{round(gpu_memory_gb)}GB")
    names.append(gpu_name)
    for name in names:
        try:
            acc = get_accelerator(name)
        except FlopwiseError:
            continue
        mem = acc.spec("memory_gb")
        if gpu_memory_gb and mem and abs(mem - gpu_memory_gb) > _MEMORY_TOLERANCE * mem:
            continue
        return acc.id
    return None


def _finite(value: Any) -> float | None:
    """A finite number from a fetched field, or None (strings, NaN, inf are not prices)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def offers_from_gpuhunt(items: Iterable[Any], as_of: str) -> tuple[list[Offer], int]:
    """One offer per provider+instance (its cheapest location), spot price merged in.

    Network, fabric, NVMe and shared file system are not in gpuhunt: they are copied from the
    embedded row of the same provider and instance when there is one, else left unknown.
    """
    known = {(o.provider.lower(), o.instance.lower()): o for o in load_offers()}
    source = f"gpuhunt {_gpuhunt_version()} ({GPUHUNT_URL})"
    grouped: dict[tuple[str, str], dict[str, Any]] = {}
    skipped = 0
    for item in items:
        provider = str(getattr(item, "provider", "") or "").strip().lower()
        instance = str(getattr(item, "instance_name", "") or "").strip()
        price = _finite(getattr(item, "price", None))
        count = _finite(getattr(item, "gpu_count", None))
        if not provider or not instance or not price or price <= 0:
            skipped += 1
            continue
        if not count or count < 1 or count != int(count):  # e.g. 0.5 of a GPU: not an offer
            skipped += 1
            continue
        acc = map_accelerator(
            getattr(item, "gpu_name", None), getattr(item, "gpu_memory", None), instance
        )
        if acc is None:
            skipped += 1
            continue
        g = grouped.setdefault(
            (provider, instance),
            {"acc": acc, "gpus": int(count), "od": None, "spot": None, "locations": set()},
        )
        location = str(getattr(item, "location", "") or "")
        g["locations"].add(location)
        slot = "spot" if getattr(item, "spot", False) else "od"
        if g[slot] is None or price < g[slot][0]:
            g[slot] = (price, location)
    offers = []
    for (provider, instance), g in sorted(grouped.items()):
        price, region = g["od"] or g["spot"]
        base = known.get((provider, instance.lower()))
        note = (
            f"cheapest {'on-demand' if g['od'] else 'spot'} price of {len(g['locations'])} "
            f"location(s) in gpuhunt; gpuhunt gpu name mapped to {g['acc']}"
        )
        if base is not None:
            note += "; network, NVMe and shared FS copied from the embedded catalog row"
        offers.append(
            Offer(
                provider=provider,
                instance=instance,
                region=region,
                accelerator=g["acc"],
                gpus=g["gpus"],
                price_per_hour=price,
                price_kind="on_demand" if g["od"] else "spot",
                spot_price_per_hour=g["spot"][0] if g["spot"] else None,
                network_gbit_s=base.network_gbit_s if base else None,
                fabric=base.fabric if base else "",
                local_nvme_tb=base.local_nvme_tb if base else None,
                shared_fs=base.shared_fs if base else "",
                source=source,
                as_of=as_of,
                note=note,
                origin="overlay",
            )
        )
    return offers, skipped


def offers_csv(offers: Iterable[Offer]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(OFFER_COLUMNS)
    for o in offers:
        d = o.to_dict()
        writer.writerow(["" if d[c] is None else d[c] for c in OFFER_COLUMNS])
    return buf.getvalue().encode("utf-8")


def refresh_offers(
    source: str = "gpuhunt", *, fetch: Fetcher | None = None, today: str | None = None
) -> RefreshResult:
    """Fetch offers and write the user's overlay offers.csv; see the module docstring."""
    if source not in SOURCES:
        raise FlopwiseError(f"unknown refresh source {source!r}; valid: {', '.join(SOURCES)}")
    path = overlay_dir() / "offers.csv"
    check_not_user_edited(path)  # before any network use: fail fast, fetch nothing
    items = (fetch or gpuhunt_fetch)()
    as_of = today or datetime.now(timezone.utc).date().isoformat()
    offers, skipped = offers_from_gpuhunt(items, as_of)
    if not offers:
        raise FlopwiseError(
            f"{source} returned no offers for accelerators in the catalog ({skipped} skipped); "
            "nothing was written"
        )
    data = offers_csv(offers)
    # Prove the file reads back through the same loader before it replaces anything.
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "offers.csv"
        probe.write_bytes(data)
        try:
            read_offers_file(probe)
        except FlopwiseError as exc:  # name the data, not a temporary file that is gone
            raise FlopwiseError(
                str(exc).replace(str(probe), f"offers fetched from {source}")
                + "; nothing was written"
            ) from None
    check_not_user_edited(path)  # again: the user may have edited it while we fetched
    side = sidecar_path(path)
    meta = {"sha256": _sha256(data), "source": source, "written_at": as_of, "offers": len(offers)}
    try:
        _atomic_write(path, data)
        _atomic_write(side, (json.dumps(meta, indent=2) + "\n").encode("utf-8"))
    except OSError as exc:
        raise FlopwiseError(
            f"cannot write {exc.filename or path}: {exc.strerror or exc}; the previous "
            "overlay (if any) is unchanged"
        ) from None
    return RefreshResult(path, side, len(offers), skipped, source, as_of)
