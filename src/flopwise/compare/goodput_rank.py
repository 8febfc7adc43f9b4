"""Goodput in a comparison: effective days and cost per row, and which keys rank the rows.

Rows planned by the training model get the plan's goodput (flopwise.plan.goodput) and are
ranked by effective time and cost, so an offer whose job fails more or checkpoints slower pays
for it. First-order rows (--mfu) carry no training state to checkpoint: they keep the ideal
figures and, when any row lacks a goodput, the whole table ranks by the ideal figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flopwise.errors import FlopwiseError


def goodput_fields(plan: dict[str, Any], cost_usd: float | None, inputs: Any) -> dict[str, Any]:
    """The goodput keys of one comparison row (None where the plan has no goodput)."""
    empty: dict[str, Any] = {
        "goodput": None,
        "goodput_fraction": None,
        "effective_train_days": None,
        "effective_cost_usd": None,
    }
    if inputs is None or plan.get("method") != "model":
        return empty
    from flopwise.plan.goodput import goodput_from_plan_dict

    try:
        g = goodput_from_plan_dict(plan, inputs)
    except FlopwiseError:
        return empty
    frac = g.goodput_fraction
    return {
        "goodput": g.to_dict(),
        "goodput_fraction": frac,
        "effective_train_days": g.effective_train_days,
        "effective_cost_usd": None if cost_usd is None or not frac else cost_usd / frac,
    }


def rank_keys(rows: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """(time key, cost key): effective figures when every row has them, else the ideal ones."""
    if rows and all(r.get("effective_train_days") is not None for r in rows):
        return "effective_train_days", "effective_cost_usd"
    return "train_days", "cost_usd"
