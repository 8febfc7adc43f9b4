"""The shape of a validation report, shared by the training and inference validators."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


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
