"""The comparison says which offers its ranking cannot tell apart."""

from __future__ import annotations

from flopwise.compare.overlap import within_error_of_first


def test_rows_whose_range_overlaps_the_first_are_named() -> None:
    rows = [
        {"cost_usd": 10.0, "cost_usd_interval": [9.0, 12.0]},
        {"cost_usd": 11.0, "cost_usd_interval": [10.0, 13.0]},  # overlaps
        {"cost_usd": 20.0, "cost_usd_interval": [18.0, 25.0]},  # does not
        {"cost_usd": 12.5, "cost_usd_interval": None},  # no range: not claimed either way
    ]
    assert within_error_of_first(rows, "cost_usd") == [1]
    assert within_error_of_first(rows, "train_days") == []  # no interval on that metric


def test_no_first_interval_means_no_claim() -> None:
    rows = [{"cost_usd": 1.0}, {"cost_usd": 1.1, "cost_usd_interval": [1.0, 1.2]}]
    assert within_error_of_first(rows, "cost_usd") == []
    assert within_error_of_first([], "cost_usd") == []


def test_every_ranking_metric_of_compare_has_its_range() -> None:
    # the metrics compare ranks on (engine.compare_train / compare_infer: time and cost, online
    # and offline) each name the interval field their rows carry
    from flopwise.compare.overlap import INTERVAL_OF

    ranked = {
        "train_days",
        "cost_usd",
        "effective_train_days",
        "effective_cost_usd",
        "e2e_latency_s",
        "cost_per_million_output_tokens",
        "makespan_s",
        "batch_cost_usd",
    }
    assert ranked <= set(INTERVAL_OF)
    rows = [
        {"batch_cost_usd": 5.0, "batch_cost_usd_interval": [4.0, 6.0]},
        {"batch_cost_usd": 7.0, "batch_cost_usd_interval": [5.5, 9.0]},
        {"batch_cost_usd": 9.0, "batch_cost_usd_interval": [8.0, 11.0]},
    ]
    assert within_error_of_first(rows, "batch_cost_usd") == [1]
