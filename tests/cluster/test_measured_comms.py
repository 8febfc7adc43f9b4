"""Planners read measured busbw per network tier through results.measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from flopwise.hardware import hardware_from_catalog
from flopwise.results.measured import apply_measurements, comms_tier
from flopwise.results.store import ResultStore


def _comms(store: ResultStore, busbw: float, group: str, nodes: int, **kw: str) -> int:
    summary = {"op": "all_reduce", "busbw_gbps": busbw, "group": group, "nodes": nodes}
    return store.add("comms", summary, {"rows": []}, accelerator="h100-sxm", **kw)


@pytest.mark.parametrize(
    ("group", "nodes", "tier"),
    [
        ("intra", 1, "intra"),
        ("intra", 4, "intra"),
        ("all", 1, "intra"),
        ("all", 2, "inter"),
        ("inter", 2, "inter"),
    ],
)
def test_comms_tier(group: str, nodes: int, tier: str) -> None:
    assert comms_tier({"group": group, "nodes": nodes}) == tier


def test_intra_and_inter_come_from_their_own_newest_runs(isolated_home: Path) -> None:
    store = ResultStore()
    _comms(store, 300.0, "intra", 1)
    older_inter = _comms(store, 20.0, "inter", 2)
    newest_intra = _comms(store, 360.0, "intra", 2)  # intra-node groups on a 2-node run
    _comms(store, 1.0, "inter", 2, status="failed")  # failed runs are never used
    hw = apply_measurements(hardware_from_catalog("h100-sxm"))
    assert hw.intra_busbw_gbps == 360.0
    assert hw.inter_busbw_gbps == 20.0
    assert f"result {newest_intra} " in hw.origins["intra_busbw_gbps"].detail
    assert f"result {older_inter} " in hw.origins["inter_busbw_gbps"].detail


def test_pinned_comms_result_wins_its_tier(isolated_home: Path) -> None:
    store = ResultStore()
    pinned = _comms(store, 250.0, "intra", 1)
    _comms(store, 360.0, "intra", 1)
    _comms(store, 40.0, "all", 2)
    hw = apply_measurements(hardware_from_catalog("h100-sxm"), str(pinned))
    assert (hw.intra_busbw_gbps, hw.inter_busbw_gbps) == (250.0, 40.0)
