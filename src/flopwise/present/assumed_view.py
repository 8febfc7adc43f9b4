"""Rows for a plan's ``assumed`` block: every fallback the plan rests on, one per row."""

from __future__ import annotations

from typing import Any

from flopwise.present.console import fmt_num


def value_text(v: Any) -> str:
    """One measured or assumed hardware value as text: numbers rounded, a measured attention
    curve ({"fwd": [TFLOPS, s_half], ...}) as its rates and half-rate lengths."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return fmt_num(float(v), digits=3 if abs(v) < 10 else 1)
    if isinstance(v, dict):
        parts = []
        for key, item in v.items():
            if isinstance(item, list | tuple) and len(item) == 2:
                parts.append(
                    f"{key} {value_text(item[0])} TFLOPS (half at {value_text(item[1])} tokens)"
                )
            else:
                parts.append(f"{key} {value_text(item)}")
        return ", ".join(parts)
    return str(v)


def assumed_rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """("ASSUMED", "name value (why)") rows, sorted by name; none when nothing was assumed."""
    return [
        ("ASSUMED", f"{k} {value_text(v['value'])} ({v['source']})")
        for k, v in sorted((doc.get("assumed") or {}).items())
    ]
