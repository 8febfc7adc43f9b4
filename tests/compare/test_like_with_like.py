"""compare states what each row ran and ranks like with like (issue 15)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from flopwise.catalog.offers import OFFER_COLUMNS
from flopwise.compare import (
    CompareInferJob,
    CompareTrainJob,
    compare_infer,
    compare_train,
    from_accelerators,
    from_offers,
    planners,
)
from flopwise.compare.engine import catalog_hardware
from flopwise.compare.rows import PRICE_STALE_DAYS, CompareRow, price_date, slice_chips
from flopwise.workload.hf import load_model


def test_same_batch_on_every_row_and_the_rule_is_stated() -> None:
    job = CompareInferJob(batch=16, input_len=1024, output_len=256)
    result = compare_infer(
        load_model("llama-3.1-8b"), job, from_offers(providers=["aws", "lambda"])
    )
    doc = result.to_dict()
    assert doc["job"]["batch_rule"] == "every offer at the same batch per replica: 16"
    assert doc["rows"] and all(r["batch"] == 16 for r in doc["rows"])
    for r in doc["rows"]:
        assert f"tp{r['layout']['tp']} pp{r['layout']['pp']}" in r["ran"]
        assert "batch 16 per replica" in r["ran"]
        assert "train_days" not in r  # an infer row carries no training fields


def test_batch_max_says_batches_differ() -> None:
    job = CompareInferJob(batch=None, input_len=2048, output_len=256, tp=4)
    assert "batches differ" in job.batch_rule


def test_latency_target_picks_each_offers_largest_batch_within_it() -> None:
    model = load_model("llama-3.1-8b")
    cands = from_accelerators(["h100-sxm", "l40s"], 2.0)
    job = CompareInferJob(input_len=1024, output_len=256, tp=1, target_tpot_ms=25.0)
    doc = compare_infer(model, job, cands).to_dict()
    assert "TPOT <= 25 ms" in doc["job"]["batch_rule"]
    for r in doc["rows"]:
        assert r["tpot_ms"] <= 25.0
        # one more request per replica would miss the target (or not fit)
        nxt = planners.infer_estimate(
            model,
            catalog_hardware(next(c for c in cands if c.accelerator == r["accelerator"])),
            1,
            CompareInferJob(batch=r["batch"] + 1, input_len=1024, output_len=256, tp=1),
        )
        assert nxt["fits"] is False or nxt["tpot_ms"] > 25.0


def test_price_dates_are_publication_dates_or_unknown() -> None:
    today = dt.date(2026, 11, 22)
    assert price_date(None, "on_demand", today) == ("date unknown", None, False)
    assert price_date("2026-10-01", "on_demand", today) == ("2026-10-01", 52, False)
    old = (today - dt.timedelta(days=PRICE_STALE_DAYS + 1)).isoformat()
    assert price_date(old, "on_demand", today)[2] is True
    assert price_date(None, "given", today) == ("given", None, False)


def test_stale_overlay_price_is_flagged(isolated_home: Path) -> None:
    path = isolated_home / "catalog" / "offers.csv"
    path.parent.mkdir(parents=True)
    header = ",".join((*OFFER_COLUMNS, "published"))
    row = (
        "acme,h100x8,eu,h100-sxm,8,16,on_demand,,3200,infiniband,,,https://x,2026-11-22,,2025-01-15"
    )
    path.write_text(header + "\n" + row + "\n", encoding="utf-8")
    doc = compare_train(
        load_model("llama-3.1-8b"),
        CompareTrainJob(tokens=1e11, gpus=16),
        from_offers(providers=["acme"]),
    ).to_dict()
    (r,) = doc["rows"]
    assert r["price_published"] == "2025-01-15" and r["price_stale"] is True
    assert r["price_age_days"] > PRICE_STALE_DAYS


@pytest.mark.parametrize(
    ("asked", "size", "chips"), [(1024, 5888, 5888), (1024, 256, 1024), (600, 256, 512)]
)
def test_slices_plan_the_asked_count_or_the_nearest_whole_slices(
    asked: int, size: int, chips: int
) -> None:
    got, note = slice_chips(asked, size)
    assert got == chips and (("as asked" in note) == (asked == chips))


def test_intervals_and_goodput_flow_from_the_plan_when_present(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = planners.train_estimate

    def with_intervals(*args: Any) -> dict[str, Any]:
        est = real(*args)
        days = est["train_days"]
        est["plan"] = {
            **est["plan"],
            "train_days_interval": [days * 0.9, days * 1.2],
            "step_time_s_interval": [1.0, 2.0],
        }
        return est

    monkeypatch.setattr(planners, "train_estimate", with_intervals)
    doc = compare_train(
        load_model("llama-3.1-8b"),
        CompareTrainJob(tokens=1e12, gpus=64),
        from_accelerators(["h100-sxm"], 2.0),
    ).to_dict()
    (r,) = doc["rows"]
    assert r["cost_usd_interval"] == pytest.approx([r["cost_usd"] * 0.9, r["cost_usd"] * 1.2])
    assert r["step_time_s_interval"] == [1.0, 2.0]


def test_goodput_rows_rank_by_effective_figures() -> None:
    from flopwise.plan.goodput import GoodputInputs

    doc = compare_train(
        load_model("llama-3.1-8b"),
        CompareTrainJob(tokens=1e12, gpus=64),
        from_accelerators(["h100-sxm", "b200"], 2.0),
        goodput=GoodputInputs(),
    ).to_dict()
    assert (doc["time_metric"], doc["cost_metric"]) == (
        "effective_train_days",
        "effective_cost_usd",
    )
    for r in doc["rows"]:
        assert 0 < r["goodput_fraction"] <= 1
        assert r["effective_train_days"] >= r["train_days"]
        assert r["effective_cost_usd"] == pytest.approx(r["cost_usd"] / r["goodput_fraction"])


def test_rows_are_typed_and_carry_the_plans_intervals() -> None:
    result = compare_train(
        load_model("llama-3.1-8b"),
        CompareTrainJob(tokens=1e12, gpus=64),
        from_accelerators(["h100-sxm"], 2.0),
    )
    (row,) = result.rows
    assert isinstance(row, CompareRow)
    assert row.effective_train_days is None  # no goodput figures from the planner yet
    iv = row.train_days_interval
    assert row.train_days is not None and row.cost_usd is not None
    if iv is not None:  # the training planner's 80% interval, when it gives one
        assert iv[0] < row.train_days < iv[1]
        assert row.cost_usd_interval == pytest.approx(
            [row.cost_usd * iv[0] / row.train_days, row.cost_usd * iv[1] / row.train_days]
        )
    with pytest.raises(AttributeError):
        row.cost_usd = 0.0  # type: ignore[misc]
    assert "batch" not in row.to_dict() and row.to_dict()["gpus"] == 64
