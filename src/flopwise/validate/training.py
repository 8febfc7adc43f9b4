"""Training validation: every published run predicted from the command a user would type,
scored out of sample first.

Each row is posed by validate/train_rows.py as a `flopwise plan train` command and predicted
through the CLI's own argument parser and planner call, so the in-sample prediction is exactly
what that command prints. The model has one fitted constant, the sustained compute fraction
(plan/sustained.py). Out-of-sample predictions refit it without the row's whole source
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
from flopwise.plan.sustained import (
    SUSTAINED_COMPUTE_FRACTION,
    fraction_group,
)
from flopwise.plan.train.interval import is_attention_bound, is_long_context
from flopwise.validate.common import SkippedRow
from flopwise.validate.memory import unresolved_misfits
from flopwise.validate.scoring import Summary, summarize
from flopwise.validate.train_intervals import interval_coverage, interval_table
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

#: Values of the sustained compute fraction each row is evaluated at (0.50 to 1.30: above 1
#: where the assumed GEMM ceiling of a die without a published MAMF is too low, e.g. TPUs).
FIT_GRID: tuple[float, ...] = tuple(round(0.50 + 0.1 * i, 2) for i in range(9))


@cache
def _parser() -> Any:
    from flopwise.cli.main import build_parser

    return build_parser()


def plan_command(model: str, argv: Sequence[str], compute_fraction: float | None = None) -> Any:
    """The TrainPlan `flopwise plan train MODEL ARGV...` gives, through the CLI's own parser
    and planner call (so a validated row is exactly the command a user would type)."""
    from flopwise.cli.plan_train_cmd import train_plan_from_args

    args = _parser().parse_args(["plan", "train", model, *argv])
    return train_plan_from_args(args, sustained_compute_fraction=compute_fraction)


def predict_posed(
    posed: PosedRow, compute_fraction: float | None = None, generic: bool = False
) -> Any:
    """The TrainPlan the row's command gives; ``generic`` plans it with ``--framework
    generic`` instead of the source's framework."""
    argv = list(posed.argv)
    if generic:
        argv[argv.index("--framework") + 1] = "generic"
    return plan_command(posed.model, argv, compute_fraction)


@dataclass(frozen=True, slots=True)
class _Curve:
    """One row's predicted metric at each FIT_GRID fraction (to interpolate refits)."""

    posed: PosedRow
    group: str
    values: tuple[float, ...]
    generic: tuple[float, ...]  # the same with --framework generic
    shipped: float  # prediction with the shipped constant (what the command prints)
    memory_gib: float
    device_gib: float | None
    fits: bool | None
    attention_share: float  # the attention core's share of the step's compute (shipped plan)

    def at(self, f: float, generic: bool = False) -> float:
        vals = self.generic if generic else self.values
        g = FIT_GRID
        if f <= g[0]:
            return vals[0]
        for i in range(1, len(g)):
            if f <= g[i]:
                w = (f - g[i - 1]) / (g[i] - g[i - 1])
                # throughput-like metrics scale ~ with f: interpolate in log space
                a, b = vals[i - 1], vals[i]
                return math.exp((1 - w) * math.log(a) + w * math.log(b))
        return vals[-1]


def _curve(posed: PosedRow) -> _Curve:
    vals = tuple(float(getattr(predict_posed(posed, f), posed.metric)) for f in FIT_GRID)
    gen = tuple(
        float(getattr(predict_posed(posed, f, generic=True), posed.metric)) for f in FIT_GRID
    )
    plan = predict_posed(posed)
    return _Curve(
        posed=posed,
        group=fraction_group(posed.accelerator),
        values=vals,
        generic=gen,
        shipped=float(getattr(plan, posed.metric)),
        memory_gib=plan.best.memory.total / 2**30,
        device_gib=plan.ctx_summary["device_memory_gib"],
        fits=plan.fits,
        attention_share=plan.attention_share,
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
class ScoredRow:
    posed: PosedRow
    predicted: float  # shipped constants: what the command prints
    predicted_oos: float  # constant refitted without the row's family
    predicted_generic_oos: float  # the same, planned with --framework generic
    fraction_oos: float
    validated_die: bool  # the row's die had rows outside its family (its fraction was fitted)
    memory_gib: float
    device_gib: float | None
    fits: bool | None
    attention_share: float = 0.0

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted / self.posed.measured - 1.0)

    @property
    def error_oos_pct(self) -> float:
        return 100.0 * (self.predicted_oos / self.posed.measured - 1.0)

    @property
    def long_context(self) -> bool:
        return is_long_context(self.posed.seq_len)

    @property
    def attention_bound(self) -> bool:
        """In the attention-bound interval regime (plan/train/interval.py)."""
        return is_attention_bound(self.attention_share)

    def step_ratio(self, generic: bool = False) -> float:
        """Measured / predicted step time, out of sample (metrics are per unit time)."""
        pred = self.predicted_generic_oos if generic else self.predicted_oos
        return pred / self.posed.measured

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
            "predicted_generic_out_of_sample": self.predicted_generic_oos,
            "compute_fraction_out_of_sample": self.fraction_oos,
            "die_validated_out_of_sample": self.validated_die,
            "memory_per_gpu_gib": self.memory_gib,
            "device_memory_gib": self.device_gib,
            "fits": self.fits,
            "attention_share": self.attention_share,
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
    def out_of_sample(self) -> Summary:
        return summarize([r.error_oos_pct for r in self.rows])

    @property
    def in_sample(self) -> Summary:
        return summarize([r.error_pct for r in self.rows])

    def grouped(self, key: Callable[[ScoredRow], str]) -> list[dict[str, Any]]:
        groups: dict[str, list[ScoredRow]] = {}
        for r in self.rows:
            groups.setdefault(key(r), []).append(r)
        out = []
        for name, rs in sorted(groups.items()):
            out.append(
                {
                    "name": name,
                    "out_of_sample": summarize([r.error_oos_pct for r in rs]).to_dict(),
                    "in_sample": summarize([r.error_pct for r in rs]).to_dict(),
                }
            )
        return out

    def interval_table(self) -> dict[str, dict[str, float]]:
        """Per regime: 10th/90th percentile of measured/predicted step time (train_intervals)."""
        return interval_table(self.rows)

    def interval_coverage(self) -> dict[str, Any]:
        """Honest coverage of the intervals, each family against the others (train_intervals)."""
        return interval_coverage(self.rows)

    @property
    def memory(self) -> Summary:
        return summarize([e for r in self.rows if (e := r.memory_error_pct) is not None])

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
            # where the point estimate is biased, not only how wide its interval is: shorter
            # sequences and long-context runs (the regimes train_intervals sizes separately)
            "by_sequence_length": self.grouped(
                lambda r: "long-context" if r.long_context else "shorter"
            ),
            # the split the intervals use: the error follows the attention core's share of the
            # step more closely than the sequence length
            "by_attention_share": self.grouped(
                lambda r: "attention-bound" if r.attention_bound else "other"
            ),
            "fitted_constants": {
                "sustained_compute_fraction": {
                    "shipped": dict(SUSTAINED_COMPUTE_FRACTION),
                    "fitted_on_all_rows": self.fitted,
                    "per_held_out_family": self.folds,
                }
            },
            "interval_coverage": self.interval_coverage(),
            "intervals": self.interval_table(),
            "memory": {
                **self.memory.to_dict(),
                "metric": "predicted peak memory per GPU vs published peak memory",
                "published_layouts_not_fitting": self.not_fitting,
                "unresolved_misfits": unresolved_misfits(self.not_fitting),
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
                    predicted_generic_oos=c.at(f, generic=True),
                    fraction_oos=f,
                    # "default" is in every fit: a die without its own rows (B200) is not
                    # validated by it
                    validated_die=c.group != "default" and c.group in fit,
                    memory_gib=c.memory_gib,
                    device_gib=c.device_gib,
                    fits=c.fits,
                    attention_share=c.attention_share,
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
