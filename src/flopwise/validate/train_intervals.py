"""Training prediction intervals from the out-of-sample rows: residuals by regime, their
bounds for a new source family, the shipped table and its honest coverage.

Regimes (plan/train/interval.py): die validated or not, framework named or generic, and
attention-bound steps (the attention core ATTENTION_BOUND_SHARE or more of the compute) apart
from the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from flopwise.plan.train.interval import ATTENTION_BOUND_SHARE, INTERVAL_LEVEL, regime_name
from flopwise.validate.scoring import new_family_bounds

if TYPE_CHECKING:
    from flopwise.validate.training import ScoredRow

#: Fewest residuals a regime needs for bounds of its own.
MIN_RESIDUALS = 5


def residuals(
    rows: Sequence[ScoredRow], validated: bool, generic: bool, attention_bound: bool
) -> list[tuple[str, float]]:
    """(family, measured/predicted step) of the out-of-sample rows in one regime."""
    return [
        (r.posed.family, r.step_ratio(generic))
        for r in rows
        if r.validated_die == validated and r.attention_bound == attention_bound
    ]


def bounds(
    rows: Sequence[ScoredRow],
    validated: bool,
    generic: bool,
    attention_bound: bool,
    without: str | None = None,
) -> tuple[tuple[float, float], int] | None:
    """(10th, 90th percentile of a new family's measured/predicted step, n) in one
    regime, from the residuals of every family but `without`; None when fewer than
    MIN_RESIDUALS.

    An attention-bound regime without residuals takes the other rows' regime. Out of
    sample, only dies run by a single source family are unvalidated (TPUs: MaxText), so the
    unvalidated regime's residuals say how that one die family erred; an unseen die may
    err either way: its bounds are the hull with the validated regime's.
    """
    pairs = [p for p in residuals(rows, validated, generic, attention_bound) if p[0] != without]
    if len(pairs) < MIN_RESIDUALS:
        if attention_bound:
            return bounds(rows, validated, generic, False, without)
        return None
    lo, hi = new_family_bounds(pairs, 0.10, 0.90)
    if not validated:
        v = bounds(rows, True, generic, attention_bound, without)
        if v is not None:
            lo, hi = min(lo, v[0][0]), max(hi, v[0][1])
    return (lo, hi), len(pairs)


def interval_table(rows: Sequence[ScoredRow]) -> dict[str, dict[str, float]]:
    """Per regime: 10th/90th percentile of measured/predicted step time for a job of an
    unseen source family (scoring.new_family_ratios), and n."""
    out: dict[str, dict[str, float]] = {}
    for attention_bound in (False, True):
        for validated in (True, False):
            for generic in (False, True):
                if (
                    attention_bound
                    and len(residuals(rows, validated, generic, True)) < MIN_RESIDUALS
                ):
                    # too few to stand alone: bounds() would return the other regime's, and
                    # written under the attention-bound name they would be labelled as its
                    # residuals; the planner falls back to the other regime itself
                    continue
                b = bounds(rows, validated, generic, attention_bound)
                if b is None:
                    continue
                (lo, hi), n = b
                out[regime_name(validated, not generic, attention_bound)] = {
                    "lo": round(lo, 4),
                    "hi": round(hi, 4),
                    "n": n,
                }
    return out


def interval_coverage(rows: Sequence[ScoredRow]) -> dict[str, Any]:
    """Honest coverage: each family's rows against intervals built without that family,
    in the row's regime (validated die, sequence length)."""
    inside = total = 0
    per_family: dict[str, list[int]] = {}
    per_regime: dict[str, list[int]] = {}
    seen: dict[tuple[str, bool, bool], tuple[tuple[float, float], int] | None] = {}
    for r in rows:
        fam = r.posed.family
        key = (fam, r.validated_die, r.attention_bound)
        if key not in seen:
            # the row's own family has rows in the regime, so the others must have some
            # for a fair test: an unvalidated die is validated only by its own family
            seen[key] = (
                bounds(rows, r.validated_die, False, r.attention_bound, without=fam)
                if r.validated_die
                else None
            )
        b = seen[key]
        if b is None:
            continue
        (lo, hi), _ = b
        hit = int(lo <= r.step_ratio() <= hi)
        inside += hit
        total += 1
        for table, name in (
            (per_family, fam),
            (per_regime, "attention-bound" if r.attention_bound else "other"),
        ):
            cell = table.setdefault(name, [0, 0])
            cell[0] += hit
            cell[1] += 1
    return {
        "level_pct": 100.0 * INTERVAL_LEVEL,
        "coverage_pct": 100.0 * inside / total if total else None,
        "n": total,
        "by_family_pct": {f: 100.0 * a / n for f, (a, n) in per_family.items()},
        "by_attention_share": {
            name: {"coverage_pct": 100.0 * a / n, "n": n} for name, (a, n) in per_regime.items()
        },
        "method": "each family's out-of-sample rows against 10th-90th percentile "
        "intervals built from the other families' out-of-sample residuals in the row's "
        "regime (every family's bias combined with every row's scatter inside its family; "
        f"steps whose attention core is {ATTENTION_BOUND_SHARE:.0%} or more of the compute form "
        "their own regime)",
    }
