"""The fitted constant and the cross-framework hold-out that checks it is not memorised."""

from __future__ import annotations

import pytest

from flopwise.plan.train.constants import SUSTAINED_COMPUTE_FRACTION
from flopwise.validate.calibration import _with_die, fit_fraction, hold_out
from flopwise.validate.training import load_training_runs


@pytest.mark.parametrize("die", ["a100", "h100"])
def test_shipped_fraction_is_the_minimax_fit_over_all_rows(die: str) -> None:
    rows = [r for r, d in _with_die(load_training_runs()) if d == die]
    assert fit_fraction(rows) == pytest.approx(SUSTAINED_COMPUTE_FRACTION[die], abs=0.0051)


# Fit on one framework's runs, predict another's with everything else fixed. Measured here
# (minimax fits): H100 NeMo -> MosaicML 5.0% mean / 8.7% worst, MosaicML -> NeMo 2.3% / 6.8%;
# A100 Megatron-2021+BLOOM -> MosaicML 5.9% / 14.9%, MosaicML -> Megatron+BLOOM 7.6% / 12.1%.
# Bounds carry ~1.5 points of slack over those numbers; a model that memorised each family
# through its constant would miss the held-out family by far more.
HOLD_OUTS = [
    ("h100", ("nemo",), ("mpt",), 6.5, 10.5),
    ("h100", ("mpt",), ("nemo",), 4.0, 8.5),
    ("a100", ("megatron", "bloom"), ("mpt",), 7.5, 16.5),
    ("a100", ("mpt",), ("megatron", "bloom"), 9.0, 14.0),
]


@pytest.mark.slow
@pytest.mark.parametrize(("die", "fit_on", "predict", "mape", "worst"), HOLD_OUTS)
def test_cross_framework_hold_out(
    die: str, fit_on: tuple[str, ...], predict: tuple[str, ...], mape: float, worst: float
) -> None:
    res = hold_out(die, fit_on, predict)
    assert res.n >= 8
    assert res.mape_pct <= mape
    assert res.max_abs_error_pct <= worst
    # the held-out fit lands near the all-rows value: the constant is a property of the die
    assert res.fraction == pytest.approx(SUSTAINED_COMPUTE_FRACTION[die], abs=0.06)
