"""The inference validation plans rows in worker processes: the same table as one process."""

from __future__ import annotations

import pytest

from flopwise.validate.inference import build_table, validation_workers
from flopwise.validate.inference_rows import posed_rows


def test_forked_workers_give_the_same_predictions_in_the_same_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = [r for r in posed_rows()[0] if r.family in ("trtllm09", "trtllm05")][:60]
    monkeypatch.setenv("FLOPWISE_WORKERS", "1")
    serial = build_table(rows, grid_modes=())
    monkeypatch.setenv("FLOPWISE_WORKERS", "2")
    assert validation_workers() == 2
    forked = build_table(rows, grid_modes=())
    assert forked[0] == serial[0]
    assert [t.key for t in forked[1]] == [t.key for t in serial[1]]
    assert [(r.id, why) for r, why in forked[2]] == [(r.id, why) for r, why in serial[2]]


def test_worker_count_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOPWISE_WORKERS", "3")
    assert validation_workers() == 3
    monkeypatch.setenv("FLOPWISE_WORKERS", "zero")  # not a count: one per core
    assert validation_workers() >= 1
