"""`catalog refresh`: atomic overlay, embedded fallback, user edits kept, clean offline failure.

No test touches the network: fetchers are injected, and gpuhunt is replaced by fakes.
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import run_cli
from flopwise.catalog.offers import load_offers
from flopwise.catalog.refresh import (
    gpuhunt_fetch,
    map_accelerator,
    refresh_offers,
    sidecar_path,
)
from flopwise.errors import FlopwiseError


@dataclass
class Item:
    """The attributes of gpuhunt's CatalogItem that refresh reads."""

    provider: str
    instance_name: str
    location: str
    price: float
    gpu_count: int
    gpu_name: str | None
    gpu_memory: float | None
    spot: bool


ITEMS = [
    Item("lambda", "gpu_8x_h100_sxm5", "us-east-1", 21.52, 8, "H100", 80, False),
    Item("lambda", "gpu_8x_h100_sxm5", "us-west-1", 23.92, 8, "H100", 80, False),
    Item("aws", "p4d.24xlarge", "us-east-1", 21.96, 8, "A100", 40, False),
    Item("aws", "p4d.24xlarge", "us-east-1", 6.50, 8, "A100", 40, True),
    Item("runpod", "A100-PCIe-80", "eu", 1.64, 1, "A100", 80, False),
    Item("azure", "NC6", "eastus", 0.90, 1, "K80", 12, False),  # not in the catalog
    Item("gcp", "broken", "x", 0.0, 1, "H100", 80, False),  # no price
]


def _overlay(home: Path) -> Path:
    return home / "catalog" / "offers.csv"


def test_refresh_writes_overlay_and_keeps_embedded_fallback(isolated_home: Path) -> None:
    embedded = len(load_offers())
    result = refresh_offers(fetch=lambda: ITEMS, today="2026-12-01")
    path = _overlay(isolated_home)
    assert result.path == path and path.is_file()
    assert result.offers == 3 and result.skipped == 2
    meta = json.loads(sidecar_path(path).read_text())
    assert meta["source"] == "gpuhunt" and len(meta["sha256"]) == 64
    offers = {(o.provider, o.instance): o for o in load_offers()}
    lam = offers[("lambda", "gpu_8x_h100_sxm5")]
    assert lam.price_per_hour == 21.52 and lam.as_of == "2026-12-01"  # cheapest location
    assert lam.region == "us-east-1" and "gpuhunt" in lam.source
    p4d = offers[("aws", "p4d.24xlarge")]
    assert p4d.accelerator == "a100-sxm-40gb"
    assert p4d.spot_price_per_hour == 6.50 and p4d.price_per_hour == 21.96
    assert p4d.network_gbit_s == 400 and p4d.fabric == "efa"  # copied from the embedded row
    assert offers[("runpod", "A100-PCIe-80")].accelerator == "a100-pcie-80gb"
    assert offers[("aws", "p5.48xlarge")].origin == "embedded"  # fallback for the rest
    assert len(offers) == embedded + 1  # runpod is new; lambda and aws rows replaced


def test_refresh_again_replaces_its_own_file(isolated_home: Path) -> None:
    refresh_offers(fetch=lambda: ITEMS, today="2026-12-01")
    cheaper = [
        *ITEMS[:1],
        Item("lambda", "gpu_8x_h100_sxm5", "us-east-1", 19.0, 8, "H100", 80, False),
    ]
    result = refresh_offers(fetch=lambda: cheaper, today="2026-12-02")
    assert result.offers == 1
    offers = {(o.provider, o.instance): o for o in load_offers()}
    assert offers[("lambda", "gpu_8x_h100_sxm5")].price_per_hour == 19.0


def test_refresh_never_overwrites_a_user_edit(isolated_home: Path) -> None:
    refresh_offers(fetch=lambda: ITEMS, today="2026-12-01")
    path = _overlay(isolated_home)
    edited = (
        path.read_text()
        + "mycloud,x,eu,h100-sxm,8,9,on_demand,,,,,,https://example.com,2026-12-01,mine\n"
    )
    path.write_text(edited)
    fetched = []
    with pytest.raises(FlopwiseError, match="was edited since flopwise wrote it"):
        refresh_offers(fetch=lambda: fetched.append(1) or ITEMS)
    assert path.read_text() == edited
    assert fetched == []  # refused before using the network


def test_refresh_refuses_a_hand_written_overlay(isolated_home: Path) -> None:
    path = _overlay(isolated_home)
    path.parent.mkdir(parents=True)
    path.write_text("provider,instance\n")
    with pytest.raises(FlopwiseError, match="was not written by flopwise"):
        refresh_offers(fetch=lambda: ITEMS)
    assert path.read_text() == "provider,instance\n"


def test_nothing_usable_writes_nothing(isolated_home: Path) -> None:
    with pytest.raises(FlopwiseError, match="no offers for accelerators in the catalog"):
        refresh_offers(fetch=lambda: ITEMS[-2:])
    assert not _overlay(isolated_home).exists()


def test_missing_gpuhunt_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gpuhunt", None)  # import gpuhunt -> ImportError
    with pytest.raises(FlopwiseError, match=r"pip install 'flopwise\[refresh\]'"):
        gpuhunt_fetch()


def test_offline_gpuhunt_is_one_clean_error(
    monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    fake = types.ModuleType("gpuhunt")

    def query(**_: object) -> list[object]:
        raise ConnectionError("Failed to resolve 'dstack-gpu-pricing.s3.amazonaws.com'\nmore")

    fake.query = query  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gpuhunt", fake)
    with pytest.raises(FlopwiseError) as info:
        refresh_offers()
    message = str(info.value)
    assert "offline" in message and "ConnectionError" in message and "\n" not in message
    assert not _overlay(isolated_home).exists()


def test_cli_refresh_offline_exits_2_without_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    fake = tmp_path / "fakes" / "gpuhunt"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(  # what gpuhunt 0.1.34 does offline: log, then raise
        "import logging\n"
        "class GPUHuntError(Exception):\n    pass\n"
        "def query(**kwargs):\n"
        "    log = logging.getLogger('gpuhunt._internal.catalog')\n"
        "    for p in ('aws', 'gcp'):\n"
        "        try:\n"
        "            raise OSError('[Errno -2] Name or service not known')\n"
        "        except OSError:\n"
        "            log.exception('Failed to load %s catalog.', p)\n"
        "    raise GPUHuntError('Failed to load catalogs of all providers')\n"
    )
    src = Path(__file__).resolve().parents[2] / "src"
    monkeypatch.setenv("PYTHONPATH", f"{fake.parent}:{src}")
    proc = run_cli("catalog", "refresh", "--from", "gpuhunt")
    assert proc.returncode == 2
    assert proc.stderr.startswith("flopwise: error: could not fetch the gpuhunt catalog")
    assert "GPUHuntError: Failed to load catalogs of all providers" in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert not _overlay(isolated_home).exists()
    listed = run_cli("catalog", "offers", "--json")  # the embedded catalog still works
    assert listed.returncode == 0 and len(json.loads(listed.stdout)["offers"]) >= 40


@pytest.mark.parametrize(
    ("name", "memory", "instance", "expected"),
    [
        ("A100", 40, "p4d.24xlarge", "a100-sxm-40gb"),
        ("A100", 80, "p4de.24xlarge", "a100-sxm-80gb"),
        ("A100", 80, "A100-PCIe-80", "a100-pcie-80gb"),
        ("H100", 80, "gpu_1x_h100_pcie", "h100-pcie"),
        ("H200", 141, "x", "h200-sxm"),
        ("L40S", 48, "x", "l40s"),
        ("H100", 16, "x", None),  # memory contradicts the catalog
        ("T4", 16, "x", "t4"),
        ("A10G", 24, "g5.xlarge", "a10g"),
        ("K80", 12, "x", None),  # not in the catalog
        (None, None, "x", None),
    ],
)
def test_gpu_names_map_to_catalog_ids(
    name: str | None, memory: float | None, instance: str, expected: str | None
) -> None:
    assert map_accelerator(name, memory, instance) == expected
