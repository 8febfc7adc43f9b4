"""The offers catalog: embedded rows, overlay, filters and `flopwise catalog offers`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import run_cli
from flopwise.catalog._files import CatalogError
from flopwise.catalog.offers import OFFER_COLUMNS, filter_offers, load_offers
from flopwise.errors import FlopwiseError

HEADER = ",".join(OFFER_COLUMNS)


def _overlay(home: Path, *rows: str) -> Path:
    path = home / "catalog" / "offers.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join((HEADER, *rows)) + "\n", encoding="utf-8")
    return path


def test_embedded_catalog_is_broad_and_sourced() -> None:
    offers = load_offers()
    assert len(offers) >= 40
    assert len({o.provider for o in offers}) >= 10
    for o in offers:
        assert o.source.startswith("http"), o.label
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", o.as_of), o.label
        assert o.price_per_hour > 0 and o.gpus >= 1
        assert o.origin == "embedded"


def test_filters_resolve_aliases_and_prices() -> None:
    offers = load_offers()
    h100 = filter_offers(offers, accelerators=["H100"])
    assert h100 and {o.accelerator for o in h100} == {"h100-sxm"}
    aws = filter_offers(offers, providers=["AWS"])
    assert aws and {o.provider for o in aws} == {"aws"}
    cheap = filter_offers(offers, max_price_per_hour=5)
    assert cheap and all(o.price_per_hour <= 5 for o in cheap)
    assert len(cheap) < len(offers)
    both = filter_offers(offers, accelerators=["h100-sxm"], providers=["aws"])
    assert [o.instance for o in both] == ["p5.48xlarge"]


def test_unknown_provider_and_accelerator_are_one_line_errors() -> None:
    with pytest.raises(FlopwiseError, match="unknown provider 'nosuch'"):
        filter_offers(load_offers(), providers=["nosuch"])
    with pytest.raises(FlopwiseError, match="unknown accelerator"):
        filter_offers(load_offers(), accelerators=["warp-drive-9000"])


def test_overlay_replaces_same_instance_and_adds_new(isolated_home: Path) -> None:
    _overlay(
        isolated_home,
        "aws,p5.48xlarge,us-east-1,h100-sxm,8,55.04,on_demand,,3200,efa,30.72,FSx,https://example.com/p5,2026-11-01,cut",
        "mycloud,big-h100,eu,h100-sxm,8,16,committed,,800,roce,,,https://example.com/me,2026-11-02,",
    )
    offers = {(o.provider, o.instance): o for o in load_offers()}
    assert offers[("aws", "p5.48xlarge")].price_per_hour == 55.04
    assert offers[("aws", "p5.48xlarge")].as_of == "2026-11-01"
    assert offers[("mycloud", "big-h100")].price_kind == "committed"
    assert offers[("lambda", "gpu_8x_h100_sxm5")].origin == "embedded"  # fallback kept


def test_malformed_overlay_names_file_line_and_field(isolated_home: Path) -> None:
    path = _overlay(
        isolated_home,
        "mycloud,x,eu,h100-sxm,8,cheap,on_demand,,,,,,https://example.com,2026-11-02,",
    )
    with pytest.raises(CatalogError, match=re.escape(f"{path}:2: field 'price_per_hour'")):
        load_offers()
    _overlay(isolated_home, "mycloud,x,eu,h100-sxm,8,3,hourly,,,,,,https://example.com,2026-11-02,")
    with pytest.raises(CatalogError, match="'hourly' is not one of on_demand"):
        load_offers()


def test_cli_offers_json_rows_carry_price_date_and_source() -> None:
    proc = run_cli("catalog", "offers", "--json", "--accelerator", "h100", "--max-price", "30")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    rows = doc["offers"]
    assert rows
    for r in rows:
        for key in (
            "provider",
            "instance",
            "accelerator",
            "gpus",
            "price_per_hour",
            "as_of",
            "source",
        ):
            assert r[key] not in (None, ""), key
        assert r["accelerator"] == "h100-sxm" and r["price_per_hour"] <= 30
    per_gpu = [r["price_per_gpu_hour"] for r in rows]
    assert per_gpu == sorted(per_gpu)


def test_cli_offers_table_shows_as_of_and_bad_provider_exits_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    proc = run_cli("catalog", "offers", "--provider", "aws")
    assert proc.returncode == 0, proc.stderr
    assert "p5.48xlarge" in proc.stdout and "published" in proc.stdout
    assert "date unknown" in proc.stdout  # a snapshot's read date is not the price's date
    assert "2026-11-22" in proc.stdout  # ...which is shown as when it was read
    bad = run_cli("catalog", "offers", "--provider", "nosuch")
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
