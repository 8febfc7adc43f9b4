"""One error type for bad input, so front doors can print one line and exit 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class FlopwiseError(ValueError):
    """Bad input or an impossible request. The message is one line meant for the user."""


def did_you_mean(value: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ' (did you mean a, b?)' for the nearest choices, or '' when none is close."""
    pool = list(dict.fromkeys(choices))
    lowered = {c.lower(): c for c in pool}
    close = difflib.get_close_matches(value.lower(), list(lowered), n=n, cutoff=0.5)
    if not close:
        # Prefix/substring matches catch 'h100' -> 'h100-sxm', 'h100-pcie'.
        v = value.lower()
        close = [c for c in lowered if v in c or c in v][:n]
    if not close:
        return ""
    return " (did you mean " + ", ".join(lowered[c] for c in close) + "?)"


def unknown(kind: str, value: str, choices: Iterable[str]) -> FlopwiseError:
    """Build the standard 'unknown X' error with suggestions."""
    pool = sorted(set(choices))
    hint = did_you_mean(value, pool)
    if not hint:
        shown = ", ".join(pool[:12]) + (", ..." if len(pool) > 12 else "")
        hint = f"; known: {shown}"
    return FlopwiseError(f"unknown {kind} {value!r}{hint}")
