"""Prediction intervals sized from out-of-sample residuals, one set per regime.

An ``Interval`` is a pair of relative factors (lo, hi) on a prediction: the measured/predicted
ratios at the lower and upper quantiles (10% and 90% for an 80% interval) of the out-of-sample
residuals of the regime the prediction falls in, with how many residuals sized it and where they
came from. The factors live in package data files ``catalog/data/intervals_<kind>.json``
(``inference``; the training planner adds ``training``), regenerated from the cross-validated
residuals by ``scripts/fit_intervals.py``. This module knows nothing of either planner: a
planner names its regime and metric and gets an ``Interval`` (or None when the file has none).

File shape::

    {"coverage": 0.8, "generated_by": "...", "method": "...",
     "regimes": {"<regime>": {"<metric>": {"lo": f, "hi": f, "n": k, "source": "..."}}},
     ...planner-specific keys...}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from flopwise.errors import FlopwiseError


@dataclass(frozen=True, slots=True)
class Interval:
    """Relative interval (lo, hi) around a prediction, and the residuals behind it."""

    lo: float
    hi: float
    regime: str
    n: int
    source: str
    coverage: float = 0.8

    def __post_init__(self) -> None:
        if not 0 < self.lo <= self.hi:
            raise FlopwiseError(f"interval factors must satisfy 0 < lo <= hi, got {self}")

    def around(self, value: float) -> tuple[float, float]:
        """(low, high) bounds of `value`."""
        return value * self.lo, value * self.hi

    def inverse(self) -> Interval:
        """The interval of 1/x (e.g. time per token from tokens/s): factors 1/hi, 1/lo."""
        return Interval(
            1.0 / self.hi, 1.0 / self.lo, self.regime, self.n, self.source, self.coverage
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "lo_factor": self.lo,
            "hi_factor": self.hi,
            "coverage": self.coverage,
            "regime": self.regime,
            "n_residuals": self.n,
            "source": self.source,
        }


@cache
def load_interval_file(kind: str) -> Mapping[str, Any]:
    """The parsed ``intervals_<kind>.json`` shipped with the package ({} when absent)."""
    data = resources.files("flopwise.catalog").joinpath(f"data/intervals_{kind}.json")
    if not data.is_file():
        return {}
    with data.open(encoding="utf-8") as fh:
        doc = json.load(fh)
    if not isinstance(doc, dict):
        raise FlopwiseError(f"intervals_{kind}.json must hold a JSON object")
    return doc


def interval_for(kind: str, regime: str, metric: str) -> Interval | None:
    """The interval of `metric` in `regime`, or None when the file holds no residuals for it."""
    doc = load_interval_file(kind)
    cell = doc.get("regimes", {}).get(regime, {}).get(metric)
    if not cell:
        return None
    return Interval(
        lo=float(cell["lo"]),
        hi=float(cell["hi"]),
        regime=regime,
        n=int(cell["n"]),
        source=str(cell.get("source", "")),
        coverage=float(doc.get("coverage", 0.8)),
    )
