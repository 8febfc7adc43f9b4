"""Scoring helpers shared by every validation section: errors, summaries, groups, cross-validation.

Nothing here knows about training or inference. A validator turns its rows into (measured,
predicted) pairs, then uses:

- ``error_pct(measured, predicted)``: signed error in percent of the measured value;
- ``summarize(errors)`` -> ``Summary`` (n, MAPE, max |error|, bias = mean signed error);
- ``by_group(items, key, error)`` -> one ``GroupSummary`` per group (sorted by name);
- ``leave_one_group_out(rows, group, fit, predict)``: cross-validation by source family. For
  each group g, ``fit`` sees every row *not* in g and returns parameters; ``predict(row,
  params)`` then predicts g's rows. Returns the out-of-sample prediction of every row, in order,
  and the parameters fitted for each held-out group. Hand-set constants simply are not in
  ``params``; a validator with nothing fitted passes ``fit=lambda rows: None``.
- ``quantile(values, q)``: the linear-interpolation quantile used to size prediction intervals;
- ``new_family_ratios(pairs)``: the outcomes a row of an unseen source family may have, from
  (family, measured/predicted) residuals: every family's bias with every row's scatter;
  ``new_family_bounds(pairs, lo_q, hi_q)`` their quantiles, the prediction interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

R = TypeVar("R")
P = TypeVar("P")


def error_pct(measured: float, predicted: float) -> float:
    """Signed error of `predicted` in percent of `measured` (positive: over-predicted)."""
    return 100.0 * (predicted - measured) / measured


@dataclass(frozen=True, slots=True)
class Summary:
    """n, mean absolute error, worst absolute error and mean signed error, all in percent."""

    n: int
    mape_pct: float | None
    max_abs_error_pct: float | None
    bias_pct: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mape_pct": self.mape_pct,
            "max_abs_error_pct": self.max_abs_error_pct,
            "bias_pct": self.bias_pct,
        }


def summarize(errors: Iterable[float]) -> Summary:
    """Summary of signed percentage errors (None values when there are none)."""
    errs = [e for e in errors if not math.isnan(e)]
    if not errs:
        return Summary(0, None, None, None)
    n = len(errs)
    return Summary(
        n=n,
        mape_pct=sum(abs(e) for e in errs) / n,
        max_abs_error_pct=max(abs(e) for e in errs),
        bias_pct=sum(errs) / n,
    )


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group: str
    summary: Summary

    def to_dict(self, key: str = "group") -> dict[str, Any]:
        return {key: self.group, **self.summary.to_dict()}


def by_group(
    items: Sequence[R], key: Callable[[R], str], error: Callable[[R], float]
) -> list[GroupSummary]:
    """One summary per group of `items` (groups sorted by name)."""
    groups: dict[str, list[float]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(error(item))
    return [GroupSummary(g, summarize(errs)) for g, errs in sorted(groups.items())]


@dataclass(frozen=True, slots=True)
class CrossValidation:
    """Out-of-sample predictions (one per row, in order) and the parameters of each fold."""

    predictions: tuple[float, ...]
    params_by_group: dict[str, Any]


def leave_one_group_out(
    rows: Sequence[R],
    group: Callable[[R], str],
    fit: Callable[[Sequence[R]], P],
    predict: Callable[[R, P], float],
) -> CrossValidation:
    """Predict each group's rows with parameters fitted on every other group's rows."""
    names = sorted({group(r) for r in rows})
    params: dict[str, Any] = {}
    out: list[float] = [math.nan] * len(rows)
    for name in names:
        train = [r for r in rows if group(r) != name]
        fold = fit(train)
        params[name] = fold
        for i, r in enumerate(rows):
            if group(r) == name:
                out[i] = predict(r, fold)
    return CrossValidation(predictions=tuple(out), params_by_group=params)


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default 'linear' method) of a non-empty sequence."""
    if not values:
        raise ValueError("quantile of an empty sequence")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be in [0, 1], got {q}")
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def new_family_ratios(pairs: Sequence[tuple[str, float]]) -> list[float]:
    """What measured/predicted may be for a row of a source family none of `pairs` came from.

    `pairs` are (family, measured/predicted) out-of-sample residuals. A new job errs by its
    family's bias (how its framework, hardware and publication differ from the model) plus
    its own scatter inside the family. So every family's mean log ratio is combined with every
    row's deviation from its own family's mean: F x N equally weighted outcomes, each family's
    bias equally likely and each row's scatter as often as rows occur. Pooling the rows as they
    are would let the largest family's bias stand for all and under-cover a family it has not
    seen. The family biases are spread about their mean by sqrt((F+1)/(F-1)) (below): a few
    families understate where the next one lands. With one family it is the residuals
    themselves.
    """
    logs: dict[str, list[float]] = {}
    for family, ratio in pairs:
        logs.setdefault(family, []).append(math.log(ratio))
    means = {f: sum(v) / len(v) for f, v in logs.items()}
    scatter = [x - means[f] for f, v in logs.items() for x in v]
    n = len(means)
    centre = sum(means.values()) / n
    # F observed family biases understate where the next family's lands: their spread about
    # their own mean is short by sqrt(F/(F-1)) (Bessel) and the mean itself is uncertain by
    # 1/F of a family's variance, so a new family's deviation is widened by sqrt((F+1)/(F-1))
    # (the predictive spread of one more draw from the same distribution of biases)
    widen = math.sqrt((n + 1) / (n - 1)) if n > 1 else 1.0
    biases = [centre + widen * (u - centre) for u in means.values()]
    return [math.exp(u + d) for u in biases for d in scatter]


def new_family_bounds(
    pairs: Sequence[tuple[str, float]], lo_q: float, hi_q: float
) -> tuple[float, float]:
    """The lo_q and hi_q quantiles of ``new_family_ratios(pairs)``: the interval a row of an
    unseen source family falls in with probability hi_q - lo_q."""
    outcomes = new_family_ratios(pairs)
    return quantile(outcomes, lo_q), quantile(outcomes, hi_q)
