"""Per-shape GEMM rates from a stored `bench matmul` run, for the shape model (plan/gemm.py).

A matmul run's payload lists every shape it tried (``results``: m, n, k, status and rates).
The rate of a shape is its ``tflops`` (the headline a run reports per shape) or, in runs stored
before that field existed, its ``median_tflops``; other fields are ignored. Only shapes with
status ``ok`` and a positive rate are used; a shape measured twice keeps its later value.
A grouped run's shapes (``groups`` > 1: one MoE expert kernel of G products per call,
``bench matmul --groups``) are a table of their own (``grouped_shape_table``): a grouped
kernel's rate at (M, N, K) is not a dense GEMM's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ShapeRow = tuple[str, int, int, int, float]
#: (dtype, groups, m, n, k, tflops): one grouped GEMM of `groups` (m x k) @ (k x n) products
GroupedShapeRow = tuple[str, int, int, int, int, float]


def _rate(entry: Mapping[str, Any]) -> float | None:
    for key in ("tflops", "median_tflops"):
        value = entry.get(key)
        if isinstance(value, (int, float)) and value > 0:
            return float(value)
    return None


def _measured(payload: Mapping[str, Any]) -> dict[tuple[int, int, int, int], float]:
    """{(groups, m, n, k): tflops} of every successfully measured shape of one run."""
    found: dict[tuple[int, int, int, int], float] = {}
    results = payload.get("results")
    if not isinstance(results, list):
        return found
    for entry in results:
        if not isinstance(entry, Mapping) or entry.get("status", "ok") != "ok":
            continue
        rate = _rate(entry)
        try:
            groups, m = int(entry.get("groups") or 1), int(entry["m"])
            n, k = int(entry["n"]), int(entry["k"])
        except (KeyError, TypeError, ValueError):
            continue
        shape = (groups, m, n, k)
        if rate is None or min(shape) <= 0:
            continue
        found[shape] = rate
    return found


def shape_table(payload: Mapping[str, Any], dtype: str) -> tuple[ShapeRow, ...]:
    """(dtype, m, n, k, tflops) for every successfully measured dense shape of one matmul run."""
    found = _measured(payload)
    return tuple((dtype, m, n, k, t) for (g, m, n, k), t in sorted(found.items()) if g == 1)


def grouped_shape_table(payload: Mapping[str, Any], dtype: str) -> tuple[GroupedShapeRow, ...]:
    """(dtype, groups, m, n, k, tflops) for every measured grouped shape of one matmul run."""
    found = _measured(payload)
    return tuple((dtype, g, m, n, k, t) for (g, m, n, k), t in sorted(found.items()) if g > 1)
