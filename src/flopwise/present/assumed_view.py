"""Rows for a plan's ``assumed`` block: every fallback the plan rests on, one per row."""

from __future__ import annotations

from typing import Any

from flopwise.present.console import fmt_num


def _value(v: Any) -> str:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return fmt_num(float(v), digits=3 if abs(v) < 10 else 1)
    return str(v)


def assumed_rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """("ASSUMED", "name value (why)") rows, sorted by name; none when nothing was assumed."""
    return [
        ("ASSUMED", f"{k} {_value(v['value'])} ({v['source']})")
        for k, v in sorted((doc.get("assumed") or {}).items())
    ]
