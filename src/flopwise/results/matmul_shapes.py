"""Per-shape GEMM rates from a stored `bench matmul` run, for the shape model (plan/gemm.py).

A matmul run's payload lists every shape it tried (``results``: m, n, k, status and rates).
The rate of a shape is its ``tflops`` (the headline a run reports per shape) or, in runs stored
before that field existed, its ``median_tflops``; other fields are ignored. Only shapes with
status ``ok`` and a positive rate are used; a shape measured twice keeps its later value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ShapeRow = tuple[str, int, int, int, float]


def _rate(entry: Mapping[str, Any]) -> float | None:
    for key in ("tflops", "median_tflops"):
        value = entry.get(key)
        if isinstance(value, (int, float)) and value > 0:
            return float(value)
    return None


def shape_table(payload: Mapping[str, Any], dtype: str) -> tuple[ShapeRow, ...]:
    """(dtype, m, n, k, tflops) for every successfully measured shape of one matmul run."""
    found: dict[tuple[int, int, int], float] = {}
    results = payload.get("results")
    if not isinstance(results, list):
        return ()
    for entry in results:
        if not isinstance(entry, Mapping) or entry.get("status", "ok") != "ok":
            continue
        rate = _rate(entry)
        try:
            shape = (int(entry["m"]), int(entry["n"]), int(entry["k"]))
        except (KeyError, TypeError, ValueError):
            continue
        if rate is None or min(shape) <= 0:
            continue
        found[shape] = rate
    return tuple((dtype, m, n, k, rate) for (m, n, k), rate in sorted(found.items()))
