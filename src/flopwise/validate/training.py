"""Training validation: every published run predicted from the command a user would type,
scored out of sample first.

Each row is posed by validate/train_rows.py as a `flopwise plan train` command and predicted
through the CLI's own argument parser and planner call, so the in-sample prediction is exactly
what that command prints. The model has one fitted constant, the sustained compute fraction
(plan/train/constants.py). Out-of-sample predictions refit it without the row's whole source
family (leave one family out: Megatron-LM 2021, BLOOM, NeMo, llm-foundry, torchtitan,
MaxText); everything else stays as shipped. The headline is the out-of-sample error.

Speed: a row's prediction is evaluated once per value of FIT_GRID and interpolated, so every
fold's refit costs no new plans.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from flopwise.errors import FlopwiseError
from flopwise.plan.train.constants import (
    SUSTAINED_COMPUTE_FRACTION,
    fraction_group,
    sustained_compute_fraction,
)
from flopwise.validate.common import SkippedRow
from flopwise.validate.train_rows import (
    FAMILIES,
    PosedRow,
    load_training_runs,
    pose,
)

__all__ = [
    "FIT_GRID",
    "TrainingValidation",
    "fit_fractions",
    "load_training_runs",
    "predict_posed",
    "validate_training",
]

#: Values of the sustained compute fraction each row is evaluated at (0.50 to 1.00).
FIT_GRID: tuple[float, ...] = tuple(round(0.50 + 0.05 * i, 2) for i in range(11))


@cache
def _parser() -> Any:
    from flopwise.cli.main import build_parser

    return build_parser()


def predict_posed(posed: PosedRow, compute_fraction: float | None = None) -> Any:
    """The TrainPlan the row's command gives (through the CLI parser and planner call)."""
    from flopwise.cli.plan_train_cmd import train_plan_from_args

    args = _parser().parse_args(["plan", "train", posed.model, *posed.argv])
    return train_plan_from_args(args, sustained_compute_fraction=compute_fraction)


@dataclass(frozen=True, slots=True)
class _Curve:
    """One row's predicted metric at each FIT_GRID fraction (to interpolate refits)."""

    posed: PosedRow
    group: str
    values: tuple[float, ...]
    shipped: float  # prediction with the shipped constant (what the command prints)
    memory_gib: float
    device_gib: float | None
    fits: bool | None

    def at(self, f: float) -> float:
        g = FIT_GRID
        if f <= g[0]:
            return self.values[0]
        for i in range(1, len(g)):
            if f <= g[i]:
                w = (f - g[i - 1]) / (g[i] - g[i - 1])
                # throughput-like metrics scale ~ with f: interpolate in log space
                a, b = self.values[i - 1], self.values[i]
                return math.exp((1 - w) * math.log(a) + w * math.log(b))
        return self.values[-1]


def _curve(posed: PosedRow) -> _Curve:
    vals = tuple(float(getattr(predict_posed(posed, f), posed.metric)) for f in FIT_GRID)
    plan = predict_posed(posed)
    return _Curve(
        posed=posed,
        group=fraction_group(posed.accelerator),
        values=vals,
        shipped=float(getattr(plan, posed.metric)),
        memory_gib=plan.best.memory.total / 2**30,
        device_gib=plan.to_dict()["device_memory_gib"],
        fits=plan.fits,
    )


def _log_err(pred: float, meas: float) -> float:
    return math.log(pred / meas)


def fit_fraction(curves: Sequence[_Curve]) -> float:
    """The fraction minimising the mean absolute log error of `curves` (0.005 steps)."""
    best, best_score = FIT_GRID[0], float("inf")
    f = FIT_GRID[0]
    while f <= FIT_GRID[-1] + 1e-9:
        score = sum(abs(_log_err(c.at(f), c.posed.measured)) for c in curves)
        if score < best_score:
            best, best_score = f, score
        f = round(f + 0.005, 3)
    return best


def fit_fractions(curves: Sequence[_Curve]) -> dict[str, float]:
    """Per-die fractions (groups with rows) plus the default for dies without rows."""
    out: dict[str, float] = {}
    by_group: dict[str, list[_Curve]] = {}
    for c in curves:
        by_group.setdefault(c.group, []).append(c)
    for g, cs in by_group.items():
        if g != "default":
            out[g] = fit_fraction(cs)
    out["default"] = fit_fraction(curves) if curves else 0.75
    return out


@dataclass(frozen=True, slots=True)
class Score:
    n: int
    mape_pct: float | None
    max_abs_error_pct: float | None
    bias_pct: float | None  # mean signed error

    @staticmethod
    def of(errors: Sequence[float]) -> Score:
        if not errors:
            return Score(0, None, None, None)
        return Score(
            len(errors),
            sum(map(abs, errors)) / len(errors),
            max(map(abs, errors)),
            sum(errors) / len(errors),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mape_pct": self.mape_pct,
            "max_abs_error_pct": self.max_abs_error_pct,
            "bias_pct": self.bias_pct,
        }


@dataclass(frozen=True, slots=True)
class ScoredRow:
    posed: PosedRow
    predicted: float  # shipped constants: what the command prints
    predicted_oos: float  # constant refitted without the row's family
    fraction_oos: float
    memory_gib: float
    device_gib: float | None
    fits: bool | None

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted / self.posed.measured - 1.0)

    @property
    def error_oos_pct(self) -> float:
        return 100.0 * (self.predicted_oos / self.posed.measured - 1.0)

    @property
    def memory_error_pct(self) -> float | None:
        pub = self.posed.peak_memory_gib
        return None if pub is None else 100.0 * (self.memory_gib / pub - 1.0)

    def to_dict(self) -> dict[str, Any]:
        p = self.posed
        return {
            "id": p.id,
            "family": p.family,
            "accelerator": p.accelerator,
            "metric": p.metric,
            "measured": p.measured,
            "predicted": self.predicted,
            "predicted_out_of_sample": self.predicted_oos,
            "error_pct": self.error_pct,
            "error_out_of_sample_pct": self.error_oos_pct,
            "compute_fraction_out_of_sample": self.fraction_oos,
            "memory_per_gpu_gib": self.memory_gib,
            "device_memory_gib": self.device_gib,
            "fits": self.fits,
            "published_peak_memory_gib": p.peak_memory_gib,
            "memory_error_pct": self.memory_error_pct,
            "command": p.command,
            "note": p.note,
        }


@dataclass(frozen=True, slots=True)
class TrainingValidation:
    rows: tuple[ScoredRow, ...]
    skipped: tuple[SkippedRow, ...]
    fitted: dict[str, float]  # fitted on every row (what ships, if it is up to date)
    folds: dict[str, dict[str, float]] = field(default_factory=dict)  # family -> refit

    @property
    def out_of_sample(self) -> Score:
        return Score.of([r.error_oos_pct for r in self.rows])

    @property
    def in_sample(self) -> Score:
        return Score.of([r.error_pct for r in self.rows])

    def grouped(self, key: Callable[[ScoredRow], str]) -> list[dict[str, Any]]:
        groups: dict[str, list[ScoredRow]] = {}
        for r in self.rows:
            groups.setdefault(key(r), []).append(r)
        out = []
        for name, rs in sorted(groups.items()):
            out.append(
                {
                    "name": name,
                    "out_of_sample": Score.of([r.error_oos_pct for r in rs]).to_dict(),
                    "in_sample": Score.of([r.error_pct for r in rs]).to_dict(),
                }
            )
        return out

    @property
    def memory(self) -> Score:
        return Score.of([e for r in self.rows if (e := r.memory_error_pct) is not None])

    @property
    def not_fitting(self) -> list[str]:
        return [r.posed.id for r in self.rows if r.fits is False]

    def to_dict(self) -> dict[str, Any]:
        return {
            "headline": "out_of_sample",
            "method": "leave one source family out: the sustained compute fraction is "
            "refitted without the held-out family's rows (per GPU die, default for dies "
            "without rows); every other constant is set from physics and framework sources",
            "out_of_sample": self.out_of_sample.to_dict(),
            "in_sample": self.in_sample.to_dict(),
            "by_family": self.grouped(lambda r: r.posed.family),
            "by_accelerator": self.grouped(lambda r: r.posed.accelerator),
            "fitted_constants": {
                "sustained_compute_fraction": {
                    "shipped": dict(SUSTAINED_COMPUTE_FRACTION),
                    "fitted_on_all_rows": self.fitted,
                    "per_held_out_family": self.folds,
                }
            },
            "memory": {
                **self.memory.to_dict(),
                "metric": "predicted peak memory per GPU vs published peak memory",
                "published_layouts_not_fitting": self.not_fitting,
            },
            "n": len(self.rows),
            "rows": [r.to_dict() for r in self.rows],
            "skipped": [s.to_dict() for s in self.skipped],
        }


def _posed_rows(rows: Sequence[dict[str, str]]) -> tuple[list[PosedRow], list[SkippedRow]]:
    posed: list[PosedRow] = []
    skipped: list[SkippedRow] = []
    for row in rows:
        res = pose(row)
        if isinstance(res, str):
            skipped.append(SkippedRow(row["id"], res))
        else:
            posed.append(res)
    return posed, skipped


def validate_training(rows: Sequence[dict[str, str]] | None = None) -> TrainingValidation:
    """Every published training row predicted from its command; out-of-sample by family."""
    posed, skipped = _posed_rows(rows if rows is not None else load_training_runs())
    curves: list[_Curve] = []
    for p in posed:
        try:
            curves.append(_curve(p))
        except FlopwiseError as exc:
            skipped.append(SkippedRow(p.id, f"cannot be planned: {exc}"))
    folds: dict[str, dict[str, float]] = {}
    scored: list[ScoredRow] = []
    for fam in FAMILIES:
        held = [c for c in curves if c.posed.family == fam]
        if not held:
            continue
        fit = fit_fractions([c for c in curves if c.posed.family != fam])
        folds[fam] = fit
        for c in held:
            f = fit.get(c.group, fit["default"])
            scored.append(
                ScoredRow(
                    posed=c.posed,
                    predicted=c.shipped,
                    predicted_oos=c.at(f),
                    fraction_oos=f,
                    memory_gib=c.memory_gib,
                    device_gib=c.device_gib,
                    fits=c.fits,
                )
            )
    order = {p.id: i for i, p in enumerate(posed)}
    scored.sort(key=lambda r: order[r.posed.id])
    return TrainingValidation(
        rows=tuple(scored),
        skipped=tuple(skipped),
        fitted=fit_fractions(curves),
        folds=folds,
    )


def shipped_fraction(accelerator_id: str) -> float:
    """The compute fraction the planner uses for an accelerator (re-exported for tests)."""
    return sustained_compute_fraction(accelerator_id)
