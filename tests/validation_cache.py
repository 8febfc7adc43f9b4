"""The expensive validation results, computed once per test session and shared read-only.

`flopwise validate` plans every published training row at 19 compute fractions and every
inference row (fp8 rows at 11 fp8 fractions); several test modules assert on the same
results. Each function here computes its result the first time a test asks (with that test's
fresh, empty FLOPWISE_HOME, so from the shipped catalog and constants only) and returns the
same object afterwards.

Only for tests that change nothing the validation reads: a test that monkeypatches a constant,
writes a catalog overlay or passes its own rows must call the library functions directly.
Treat the results as read-only (dicts inside them are shared between tests).
"""

from __future__ import annotations

from functools import cache
from typing import Any

# bound at import (collection), so that a test that monkeypatches one of these names for the
# CLI still gets the real computation here
from flopwise.validate.inference import (
    Built,
    InferenceValidation,
    build_table,
    score_inference,
)
from flopwise.validate.inference_rows import PosedRow, Unposed, posed_rows
from flopwise.validate.intervals_fit import interval_doc
from flopwise.validate.training import TrainingValidation, validate_training
from flopwise.validate.unseen_training import UnseenTrainingValidation, validate_unseen_training


@cache
def inference_built() -> tuple[list[PosedRow], list[Unposed], Built]:
    """(posed rows, unposed rows, build_table with engine modes "known" and "generic").

    The "known" cells are what validate_inference plans; the "generic" ones (fp8 rows at the
    shipped fraction only, the only value interval_doc reads while it is not fitted) are what
    scripts/fit_intervals.py adds for the intervals.
    """
    posed, unposed = posed_rows()
    return posed, unposed, build_table(posed, engines=("known", "generic"))


@cache
def inference_validation() -> InferenceValidation:
    """What validate_inference() returns."""
    posed, unposed, built = inference_built()
    return score_inference(posed, unposed, built)


@cache
def inference_doc() -> dict[str, Any]:
    """validate_inference().to_dict(): the `inference` section of `flopwise validate --json`."""
    return inference_validation().to_dict()


@cache
def inference_interval_doc() -> dict[str, Any]:
    """What flopwise.validate.intervals_fit.interval_doc() returns."""
    return interval_doc(inference_built()[2])


@cache
def training_validation() -> TrainingValidation:
    """What validate_training() returns."""
    return validate_training()


@cache
def unseen_training() -> UnseenTrainingValidation:
    """validate_unseen_training() (with the CDNA3 fraction's refit), computed once."""
    return validate_unseen_training()
