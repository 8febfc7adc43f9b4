"""Fixtures for the comparison tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from flopwise.catalog.offers import OFFER_COLUMNS

EVIL = "</script><script>alert(1)</script><!--"
EVIL_INSTANCE = "<img src=x onerror=alert(2)>&amp;"


def _evil_overlay(home: Path) -> None:
    path = home / "catalog" / "offers.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    row = [
        f'"{EVIL}"',
        f'"{EVIL_INSTANCE}"',
        "eu",
        "h100-sxm",
        "8",
        "8",
        "on_demand",
        "",
        "3200",
        "infiniband",
        "",
        "",
        "https://example.com/evil",
        "2026-11-20",
        '"note with <b>tags</b>"',
    ]
    path.write_text(",".join(OFFER_COLUMNS) + "\n" + ",".join(row) + "\n", encoding="utf-8")


@pytest.fixture
def evil_offer(isolated_home: Path) -> tuple[str, str]:
    """An overlay offer whose provider and instance try to break out of the report's markup;
    it is the cheapest H100 offer, so it is the report's top row."""
    _evil_overlay(isolated_home)
    return EVIL, EVIL_INSTANCE
