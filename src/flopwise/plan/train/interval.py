"""Prediction intervals for training plans, sized from out-of-sample validation residuals.

`flopwise validate` predicts every published run with the fitted constant refitted without
the run's source family; the ratio measured/predicted step time of those out-of-sample
predictions, grouped by regime, gives the spread a new job should expect. A new job comes
from a source family the residuals do not include: its outcomes are every family's mean bias
combined with every row's scatter inside its family (validate.scoring.new_family_ratios), and
their 10th and 90th percentiles bound an 80% interval. Regimes:

- ``validated`` / ``unvalidated``: whether the accelerator's die has published runs behind its
  fitted compute fraction (out of sample, a die is unvalidated when only the held-out family
  ran on it);
- ``profile`` / ``generic``: whether the job names its framework (``--framework``), or plans
  with the generic profile (residuals of the same rows predicted with ``--framework generic``);
- ``moe``: mixture-of-experts jobs, whatever the die or framework. No MoE run is in the
  training validation; the newer published tables scored by ``validate --only
  training-unseen`` hold the only MoE residuals (nothing fitted to them), and their spread is
  the regime's: the 10th-90th percentile of their measured/predicted step, never narrower
  than the dense regime the job would otherwise get;
- ``/long-context`` (appended): sequences of LONG_CONTEXT_TOKENS and more. The published runs
  err one way there (the model is optimistic by 10-30% at 32K+ tokens in three framework
  families), so pooled with shorter rows their interval covered half of them; a long-context
  job gets the spread of long-context residuals only, and a short one no longer carries their
  tail.

The quantiles ship as data (catalog/data/intervals_training.json), written by
``python scripts/fit_intervals.py`` from the validation; tests/train/test_intervals.py checks
that the shipped file matches what the residuals give.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

#: Nominal coverage of the interval.
INTERVAL_LEVEL = 0.80

#: Sequence length (tokens) from which a job falls in the long-context interval regime. Where
#: the out-of-sample residuals change: pooled intervals covered 92% of the published rows below
#: 8K tokens, 85% at 8-16K and 50% at 32K and more (15 of 30 rows, 2026-11-23), where attention
#: is most of the work for the validated model sizes. A regime boundary, not a constant any
#: prediction uses: point predictions are the same either side of it.
LONG_CONTEXT_TOKENS = 32_768


#: Regime name of mixture-of-experts jobs in intervals_training.json.
MOE_REGIME = "moe"


@dataclass(frozen=True, slots=True)
class StepInterval:
    """Multipliers on the predicted step time: measured step / predicted step quantiles."""

    lo: float
    hi: float
    regime: str
    n: int  # out-of-sample residuals behind it
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": INTERVAL_LEVEL,
            "step_time_factor": [self.lo, self.hi],
            "regime": self.regime,
            "n_residuals": self.n,
            "source": "out-of-sample residuals of flopwise validate (leave one source family "
            "out), 10th-90th percentile of measured/predicted step time",
            "note": self.note,
        }


def regime_name(validated: bool, framework_known: bool, long_context: bool = False) -> str:
    name = f"{'validated' if validated else 'unvalidated'}-die/" + (
        "profile" if framework_known else "generic"
    )
    return name + "/long-context" if long_context else name


def is_long_context(seq_len: int) -> bool:
    """Whether a sequence length falls in the long-context interval regime."""
    return seq_len >= LONG_CONTEXT_TOKENS


@cache
def _table() -> dict[str, Any]:
    path = resources.files("flopwise.catalog").joinpath("data/intervals_training.json")
    try:
        with path.open(encoding="utf-8") as fh:
            data: dict[str, Any] = json.load(fh)
    except FileNotFoundError:  # before scripts/fit_intervals.py first ran: no intervals
        return {}
    return data


def step_interval(
    validated: bool, framework_known: bool, moe: bool, long_context: bool = False
) -> StepInterval | None:
    """The 80% step-time interval for a regime, or None when the shipped table lacks it."""
    table = _table().get("regimes", {})
    name = regime_name(validated, framework_known, long_context)
    entry = table.get(name)
    notes: list[str] = []
    if entry is None and long_context:
        name = regime_name(validated, framework_known)
        entry = table.get(name)
        notes.append(
            "no long-context residuals for this regime: the interval comes from shorter "
            "sequences, where the model is less optimistic"
        )
    if moe:
        dense = entry
        entry = table.get(MOE_REGIME)
        if entry is not None:
            name = MOE_REGIME
            notes = [
                "MoE regime: published MoE pre-training runs no constant was fitted to "
                f"(validate --only training-unseen, n={int(entry['n'])}) ran "
                f"{float(entry['lo_observed']):.2f}-{float(entry['hi_observed']):.2f}x the "
                "planned step; fine-grained experts (many small expert GEMMs, host-synchronised "
                "token dispatch) are the slow end (docs/training-planner.md)"
            ]
            if dense is not None:  # never narrower than the dense regime the job would get
                entry = {
                    "lo": min(float(entry["lo"]), float(dense["lo"])),
                    "hi": max(float(entry["hi"]), float(dense["hi"])),
                    "n": entry["n"],
                }
        else:
            entry = dense
    if entry is None:
        return None
    if long_context and not notes:
        notes.append(
            f"long-context regime: residuals of published runs at {LONG_CONTEXT_TOKENS:,}+ "
            "tokens, which ran slower than predicted (docs/training-planner.md)"
        )
    if moe and name != MOE_REGIME:
        notes.append("no MoE training run is validated: the interval comes from dense runs")
    return StepInterval(
        float(entry["lo"]), float(entry["hi"]), name, int(entry["n"]), "; ".join(notes)
    )
