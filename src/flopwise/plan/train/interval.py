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
- ``/attention-bound`` (appended): jobs whose attention core is ATTENTION_BOUND_SHARE or more
  of the step's compute (long sequences on small and mid-size models). The published runs err
  one way there: the out-of-sample error grows with the attention share in three framework
  families and on two dies (0 at a fifth of the compute, +20-30% when attention is nearly all
  of it; docs/training-planner.md), so pooled with other rows their interval covered half of
  them; an attention-bound job gets the spread of attention-bound residuals only, and another
  job no longer carries their tail. The split used to be by sequence length (32K tokens and
  more); the attention share is what the error follows (a 1B model at 16K tokens is 60%
  attention and errs like a long run, a 405B model at 32K is 42% and does not).

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

#: Sequence length (tokens) from which `validate` reports a run as long-context (its table of
#: errors by sequence length). Not an interval regime any more: ATTENTION_BOUND_SHARE is.
LONG_CONTEXT_TOKENS = 32_768

#: Share of the step's compute (recompute included) spent in the attention core from which a
#: job falls in the attention-bound interval regime: attention is most of the work. A regime
#: boundary, not a constant any prediction uses: point predictions are the same either side.
#: The natural boundary, not a tuned one: 0.4 and 0.6 give 83.3% and 82.1% out-of-sample
#: coverage against 83.3% at 0.5 (2026-11-24; 81.4% with the sequence-length split).
ATTENTION_BOUND_SHARE = 0.5


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


def regime_name(validated: bool, framework_known: bool, attention_bound: bool = False) -> str:
    name = f"{'validated' if validated else 'unvalidated'}-die/" + (
        "profile" if framework_known else "generic"
    )
    return name + "/attention-bound" if attention_bound else name


def is_long_context(seq_len: int) -> bool:
    """Whether `validate` reports a sequence length as long-context."""
    return seq_len >= LONG_CONTEXT_TOKENS


def is_attention_bound(attention_share: float) -> bool:
    """Whether a step whose attention core is this share of its compute falls in the
    attention-bound interval regime."""
    return attention_share >= ATTENTION_BOUND_SHARE


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
    validated: bool, framework_known: bool, moe: bool, attention_bound: bool = False
) -> StepInterval | None:
    """The 80% step-time interval for a regime, or None when the shipped table lacks it."""
    table = _table().get("regimes", {})
    name = regime_name(validated, framework_known, attention_bound)
    entry = table.get(name)
    notes: list[str] = []
    if entry is None and attention_bound:
        name = regime_name(validated, framework_known)
        entry = table.get(name)
        notes.append(
            "no attention-bound residuals for this regime: the interval comes from steps "
            "where attention is less of the work, where the model is less optimistic"
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
                "planned step; fine-grained experts on Megatron-Core releases up to 26.04 (many "
                "small expert GEMMs, host-synchronised token dispatch) are the slow end, the "
                "releases from 26.06 on come within about 20% (docs/training-planner.md)"
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
    if attention_bound and not notes:
        notes.append(
            "attention-bound regime: residuals of published runs whose attention core was "
            f"{ATTENTION_BOUND_SHARE:.0%} or more of the compute, which ran slower than "
            "predicted (docs/training-planner.md)"
        )
    if moe and name != MOE_REGIME:
        notes.append("no MoE training run is validated: the interval comes from dense runs")
    return StepInterval(
        float(entry["lo"]), float(entry["hi"]), name, int(entry["n"]), "; ".join(notes)
    )
