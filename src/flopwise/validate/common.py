"""The shape of a validation report, shared by the training and inference validators, and the
yes/no cells of the published-runs CSVs they read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flopwise.errors import FlopwiseError


def yes_no_cell(row: Mapping[str, str], key: str) -> bool | None:
    """A yes/no column of a published-runs CSV: True, False, or None when missing or empty
    (the planner's default)."""
    value = (row.get(key) or "").strip()
    if value not in ("", "yes", "no"):
        raise FlopwiseError(f"{key} must be yes, no or empty, got {value!r}")
    return None if not value else value == "yes"


@dataclass(frozen=True, slots=True)
class ValidationRow:
    """One published number against flopwise's prediction for the same setting."""

    id: str
    metric: str
    measured: float
    predicted: float
    note: str = ""

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted - self.measured) / self.measured

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "metric": self.metric,
            "measured": self.measured,
            "predicted": self.predicted,
            "error_pct": self.error_pct,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class SkippedRow:
    id: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class ValidationReport:
    rows: Sequence[ValidationRow]
    skipped: Sequence[SkippedRow] = field(default_factory=tuple)

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def mape_pct(self) -> float | None:
        return sum(abs(r.error_pct) for r in self.rows) / self.n if self.rows else None

    @property
    def max_abs_error_pct(self) -> float | None:
        return max(abs(r.error_pct) for r in self.rows) if self.rows else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "mape_pct": self.mape_pct,
            "max_abs_error_pct": self.max_abs_error_pct,
            "rows": [r.to_dict() for r in self.rows],
            "skipped": [s.to_dict() for s in self.skipped],
        }
