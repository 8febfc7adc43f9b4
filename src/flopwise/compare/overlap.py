"""Which offers the ranking cannot tell apart: their prediction intervals overlap the top row's.

A comparison ranks offers on point predictions; each carries an 80% interval from the planner's
out-of-sample validation errors. When another offer's interval on the ranking metric overlaps
the first offer's, the order between them is within the model's error, and the output says so
instead of presenting the ranking as settled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: The interval field of each ranking metric (compare rows carry these when the planner does).
INTERVAL_OF: dict[str, str] = {
    "cost_usd": "cost_usd_interval",
    "train_days": "train_days_interval",
    "effective_cost_usd": "cost_usd_interval",
    "effective_train_days": "train_days_interval",
    "e2e_latency_s": "e2e_latency_s_interval",
    "cost_per_million_output_tokens": "cost_per_million_output_tokens_interval",
    "makespan_s": "makespan_s_interval",
    "batch_cost_usd": "batch_cost_usd_interval",
}


def within_error_of_first(rows: Sequence[dict[str, Any]], metric: str) -> list[int]:
    """Indexes (>0) of sorted rows whose interval on `metric` overlaps row 0's; [] when the
    metric has no interval or the first row has none."""
    key = INTERVAL_OF.get(metric)
    if key is None or not rows:
        return []
    first = rows[0].get(key)
    if not first:
        return []
    lo0, hi0 = first
    out = []
    for i, r in enumerate(rows[1:], start=1):
        iv = r.get(key)
        if iv and iv[0] <= hi0 and lo0 <= iv[1]:
            out.append(i)
    return out
