"""Everything the HTML report shows, as one JSON-ready document (the report only renders it).

Combines a comparison (CompareResult.to_dict()) with the accelerator's roofline inputs and the
benchmark runs in the results store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flopwise.results.store import StoredResult
from flopwise.workload.memory_bytes import DTYPE_BYTES

#: How many stored runs the history table shows (newest first).
HISTORY_LIMIT = 200


def matmul_intensity(m: float, n: float, k: float, dtype: str) -> float | None:
    """FLOPs per byte of one GEMM reading A, B and writing C once: 2mnk / (b(mk + kn + mn))."""
    b = DTYPE_BYTES.get(dtype)
    if not b or min(m, n, k) <= 0:
        return None
    return 2.0 * m * n * k / (b * (m * k + k * n + m * n))


def _shape(summary: dict[str, Any]) -> tuple[float, float, float] | None:
    shape = summary.get("best_shape") or summary.get("shape")
    if isinstance(shape, (list, tuple)) and len(shape) == 3:
        m, n, k = shape
    elif all(key in summary for key in ("m", "n", "k")):
        m, n, k = summary["m"], summary["n"], summary["k"]
    else:
        return None
    try:
        return float(m), float(n), float(k)
    except (TypeError, ValueError):
        return None


def measured_points(results: Sequence[StoredResult], accelerator: str) -> list[dict[str, Any]]:
    """Roofline points from complete runs on this accelerator: matmul at its intensity when the
    shape is stored, memory bandwidth as a measured slope."""
    points: list[dict[str, Any]] = []
    for r in results:
        if r.status != "complete" or r.accelerator != accelerator:
            continue
        s = r.summary
        if r.kind == "matmul" and s.get("best_tflops"):
            dtype = str(s.get("dtype", "bf16"))
            shape = _shape(s)
            points.append(
                {
                    "kind": "matmul",
                    "id": r.id,
                    "dtype": dtype,
                    "tflops": float(s["best_tflops"]),
                    "intensity": None if shape is None else matmul_intensity(*shape, dtype),
                    "shape": None if shape is None else list(shape),
                    "created_at": r.created_at,
                    "host": r.host,
                }
            )
        elif r.kind == "memory" and s.get("triad_gbps"):
            points.append(
                {
                    "kind": "memory",
                    "id": r.id,
                    "gbps": float(s["triad_gbps"]),
                    "created_at": r.created_at,
                    "host": r.host,
                }
            )
    return points


def report_document(
    compare: dict[str, Any], results: Sequence[StoredResult], *, generated_at: str
) -> dict[str, Any]:
    chosen = compare.get("chosen") or {}
    hw = chosen.get("hardware") or {}
    accelerator = chosen.get("accelerator")
    roofline = None
    if hw:
        roofline = {
            "accelerator": accelerator,
            "name": hw.get("name"),
            "peak_tflops": hw.get("peak_tflops") or {},
            "matmul_tflops": hw.get("matmul_tflops") or {},
            "memory_bw_gbps": hw.get("memory_bw_gbps"),
            "achievable_bw_gbps": hw.get("achievable_bw_gbps"),
            "points": measured_points(results, str(accelerator)),
        }
    history = [r.to_dict(with_payload=False) for r in results[:HISTORY_LIMIT]]
    return {
        "generated_at": generated_at,
        "compare": compare,
        "roofline": roofline,
        "history": history,
    }
