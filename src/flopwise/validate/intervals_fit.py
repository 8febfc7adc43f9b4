"""Residual quantiles for inference prediction intervals, from the cross-validated predictions.

Four sets of out-of-sample residuals (ratio measured / predicted), each split dense/MoE and by
metric (output tokens/s, TTFT), and a fifth for closed-loop plans (``--concurrency``): the
online section's published sweeps, per model class and metric (TTFT, TPOT, tokens/s), each
deployment standing for a source family (validate.online.interval_regimes):

- validated accelerator, engine named: leave one source family out (the validate headline);
- accelerator without validated rows, engine named: leave one *accelerator* out, so each row is
  predicted as if its accelerator had never been validated (fitted constant refitted without it);
- the same two with every row planned as ``--engine generic`` (the user did not name one).

Each interval is the 10th-90th percentile of what a row of an unseen source family may see:
every family's mean bias combined with every row's scatter inside its own family
(``scoring.new_family_ratios``), so the largest family's bias does not stand for all.

``interval_doc()`` is what ``scripts/fit_intervals.py`` writes to
``catalog/data/intervals_inference.json``; ``coverage_pct`` scores the intervals honestly: each
family's rows against quantiles taken from the other families' residuals only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from flopwise.plan.infer.uncertainty import regime_name
from flopwise.validate.scoring import new_family_bounds

if TYPE_CHECKING:
    from flopwise.validate.inference import Built, ScoredRow, Target

COVERAGE = 0.8
LO_Q, HI_Q = (1.0 - COVERAGE) / 2.0, 1.0 - (1.0 - COVERAGE) / 2.0
#: Fewest residuals a regime needs for its own quantiles (fewer: the regime is left out and
#: the planner falls back, saying so).
MIN_RESIDUALS = 8
#: Metrics with their own published residuals; TPOT uses the inverse of tokens/s.
INTERVAL_METRICS = ("output_tokens_per_s", "ttft_ms")


Pairs = list[tuple[str, float]]  # (source family, measured / predicted)


def _cells(
    targets: Sequence[Target], predicted: Sequence[float], validated: bool, engine_known: bool
) -> dict[str, dict[str, Pairs]]:
    cells: dict[str, dict[str, Pairs]] = {}
    for t, p in zip(targets, predicted, strict=True):
        if t.metric not in INTERVAL_METRICS:
            continue
        name = regime_name(validated, engine_known, t.row.is_moe)
        cells.setdefault(name, {}).setdefault(t.metric, []).append((t.row.family, t.measured / p))
    return cells


def _quantiles(pairs: Pairs, source: str) -> dict[str, Any]:
    lo, hi = new_family_bounds(pairs, LO_Q, HI_Q)
    return {"lo": lo, "hi": hi, "n": len(pairs), "source": source}


def interval_doc(built: Built | None = None) -> dict[str, Any]:
    """The content of intervals_inference.json, recomputed from the published rows (`built`:
    their build_table with engine modes "known" and "generic", when already planned)."""
    from flopwise.plan.infer.constants import FP8_GEMM_FRACTION
    from flopwise.validate.inference import build_table, score, scored_grid_modes
    from flopwise.validate.inference_rows import posed_rows

    if built is None:
        engines = ("known", "generic")
        built = build_table(posed_rows()[0], engines, grid_modes=scored_grid_modes(engines))
    table, targets, _ = built
    regimes: dict[str, dict[str, Any]] = {}
    for mode in ("known", "generic"):
        planned = table.get((mode, FP8_GEMM_FRACTION), {})
        mode_targets = [t for t in targets if t.key in planned]
        for validated, grouping in ((True, "family"), (False, "accelerator")):

            def group(t: Target, by: str = grouping) -> str:
                return t.row.family if by == "family" else t.row.accelerator

            _, oos, _ = score(table, mode_targets, mode, group)
            how = f"leave-one-{grouping}-out residuals of published rows planned with " + (
                "the row's engine" if mode == "known" else "--engine generic"
            )
            for name, metrics in _cells(mode_targets, oos, validated, mode == "known").items():
                for metric, ratios in metrics.items():
                    if len(ratios) >= MIN_RESIDUALS:
                        regimes.setdefault(name, {})[metric] = _quantiles(ratios, how)
    # closed-loop plans (--concurrency) take the residuals of published closed-loop sweeps
    from flopwise.validate.online import interval_regimes, validate_online

    regimes.update(interval_regimes(validate_online().rows))
    return {
        "coverage": COVERAGE,
        "generated_by": "scripts/fit_intervals.py (flopwise.validate.intervals_fit.interval_doc)",
        "method": "lo/hi = 10th/90th percentile of measured/predicted over out-of-sample rows, "
        "each source family's mean bias combined with every row's scatter inside its family",
        "validated_accelerators": sorted({t.row.accelerator for t in targets}),
        "scored_engines": sorted({t.row.engine for t in targets}),
        "validated_weight_dtypes": sorted({t.row.weight_dtype for t in targets}),
        "scored_deployments": sorted({deployment_key(t.row) for t in targets}),
        "deployment_records": deployment_records(table, targets),
        "regimes": regimes,
    }


def deployment_records(table: Any, targets: Sequence[Target]) -> dict[str, dict[str, float]]:
    """Per scored deployment and weight class (accelerator/engine/dense|moe/weights): how its
    published runs compared with the plan, measured / planned output tokens/s at the shipped
    constants (nothing is fitted on serving rows, so in sample = out of sample): n, median,
    10th and 90th percentile. A record, not a correction: plans print it beside their range."""
    from flopwise.plan.infer.constants import FP8_GEMM_FRACTION
    from flopwise.plan.infer.uncertainty import deployment_record_key
    from flopwise.validate.scoring import quantile

    planned = table.get(("known", FP8_GEMM_FRACTION), {})
    ratios: dict[str, list[float]] = {}
    for t in targets:
        if t.metric != "output_tokens_per_s" or t.key not in planned:
            continue
        row = t.row
        key = deployment_record_key(row.accelerator, row.engine, row.is_moe, row.weight_dtype)
        ratios.setdefault(key, []).append(t.measured / planned[t.key])
    return {
        key: {
            "n": len(r),
            "median": quantile(r, 0.5),
            "lo": quantile(r, LO_Q),
            "hi": quantile(r, HI_Q),
        }
        for key, r in sorted(ratios.items())
        if len(r) >= MIN_RESIDUALS
    }


def deployment_key(row: Any) -> str:
    """accelerator/engine/dense|moe of a scored row (what a plan's coverage line looks up)."""
    from flopwise.plan.infer.uncertainty import deployment_name

    return deployment_name(row.accelerator, row.engine, row.is_moe)


def coverage_pct(rows: Sequence[ScoredRow]) -> float | None:
    """Share of out-of-sample rows whose measured value lies in an interval fitted without their
    source family (validated accelerator, named engine; dense/MoE pooled when too few)."""
    hits = total = 0
    bounds: dict[tuple[str, str, bool], tuple[float, float] | None] = {}
    for row in rows:
        t = row.target
        if t.metric not in INTERVAL_METRICS:
            continue
        key = (t.row.family, t.metric, t.row.is_moe)
        if key not in bounds:
            pool = [
                (s.target.row.family, s.target.measured / s.predicted_oos, s.target.row.is_moe)
                for s in rows
                if s.target.row.family != t.row.family and s.target.metric == t.metric
            ]
            same = [(f, r) for f, r, moe in pool if moe == t.row.is_moe]
            pairs = same if len(same) >= MIN_RESIDUALS else [(f, r) for f, r, _ in pool]
            bounds[key] = (
                new_family_bounds(pairs, LO_Q, HI_Q) if len(pairs) >= MIN_RESIDUALS else None
            )
        b = bounds[key]
        if b is None:
            continue
        total += 1
        r = t.measured / row.predicted_oos
        hits += b[0] <= r <= b[1]
    return None if total == 0 else 100.0 * hits / total
