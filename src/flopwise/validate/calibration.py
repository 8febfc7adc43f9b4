"""Calibration of the one fitted training constant, and the check that it is not memorised.

The sustained compute fraction (plan/train/constants.py SUSTAINED_COMPUTE_FRACTION) is the only
training constant set from the published runs themselves: one number per GPU die, fitted over
every validation row on that die at once (minimax: the smallest worst-row error). A model that memorised its rows would fit
each family with its own number; the cross-framework hold-out below fits the fraction on one
family of runs (e.g. NeMo/Megatron-Core) and predicts another (MosaicML's FSDP runs) with it.
Everything else in the step-time model stays fixed, so what the held-out family's error shows is
how well the physics (not the fit) carries over between frameworks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from flopwise.errors import FlopwiseError
from flopwise.plan.train.constants import SUSTAINED_COMPUTE_FRACTION
from flopwise.validate.training import _family, load_training_runs, predict_row

#: Fractions tried by the fit, 0.60 to 1.00 in steps of 0.005.
FIT_GRID: tuple[float, ...] = tuple(round(0.60 + 0.005 * i, 3) for i in range(81))


def die_of(accelerator_id: str) -> str | None:
    """The SUSTAINED_COMPUTE_FRACTION key (GPU die prefix) an accelerator id falls under."""
    best = ""
    for prefix in SUSTAINED_COMPUTE_FRACTION:
        if accelerator_id.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return best or None


@dataclass(frozen=True, slots=True)
class RowError:
    id: str
    family: str  # megatron | bloom | nemo | mpt
    die: str | None
    error_pct: float


def row_errors(
    rows: Iterable[dict[str, str]], compute_fraction: float | None = None
) -> list[RowError]:
    """Signed error per predictable row, with an optional fixed compute fraction."""
    out: list[RowError] = []
    for row in rows:
        res = predict_row(row, compute_fraction)
        if isinstance(res, str):
            continue
        plan, setup = res
        predicted = float(getattr(plan, setup.metric))
        out.append(
            RowError(
                row["id"],
                _family(row),
                die_of(plan.hardware.id),
                100.0 * (predicted / setup.measured - 1.0),
            )
        )
    return out


#: How the fraction is fitted over a set of rows: "minimax" minimises the worst row's absolute
#: error (the acceptance target bounds every row), "l2" the sum of squared errors.
FIT_CRITERIA: tuple[str, ...] = ("minimax", "l2")


def fit_fraction(
    rows: Sequence[dict[str, str]],
    criterion: str = "minimax",
    grid: Sequence[float] = FIT_GRID,
) -> float:
    """The fraction in `grid` that minimises `criterion` over the percentage errors of `rows`."""
    if criterion not in FIT_CRITERIA:
        raise FlopwiseError(f"criterion {criterion!r} is not one of {', '.join(FIT_CRITERIA)}")
    best, best_score = grid[0], float("inf")
    for f in grid:
        errs = [e.error_pct for e in row_errors(rows, f)]
        score = max(map(abs, errs)) if criterion == "minimax" else sum(e * e for e in errs)
        if score < best_score:
            best, best_score = f, score
    return best


@dataclass(frozen=True, slots=True)
class HoldOut:
    die: str
    fit_on: tuple[str, ...]
    predict: tuple[str, ...]
    fraction: float  # fitted on `fit_on` alone
    n: int  # held-out rows
    mape_pct: float
    max_abs_error_pct: float


def hold_out(
    die: str, fit_on: Sequence[str], predict: Sequence[str], criterion: str = "minimax"
) -> HoldOut:
    """Fit the fraction on the `fit_on` families' rows of one die, predict the others."""
    runs = load_training_runs()
    on_die = [r for r, e in _with_die(runs) if e == die]
    train = [r for r in on_die if _family(r) in fit_on]
    test = [r for r in on_die if _family(r) in predict]
    f = fit_fraction(train, criterion)
    errs = [abs(e.error_pct) for e in row_errors(test, f)]
    return HoldOut(
        die,
        tuple(fit_on),
        tuple(predict),
        f,
        len(errs),
        sum(errs) / len(errs),
        max(errs),
    )


def _with_die(runs: Iterable[dict[str, str]]) -> list[tuple[dict[str, str], str | None]]:
    out: list[tuple[dict[str, str], str | None]] = []
    for row in runs:
        res = predict_row(row)
        if isinstance(res, str):
            continue
        out.append((row, die_of(res[0].hardware.id)))
    return out
