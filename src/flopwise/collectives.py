"""Collective-communication conventions shared by the benchmarks and the planners.

nccl-tests reports a bus bandwidth that is comparable across group sizes:
busbw = algbw x f(n), with f from NVIDIA/nccl-tests doc/PERFORMANCE.md. ``bench comms`` reports
busbw this way, and the planners' alpha-beta collective model reads it back the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType


def _all_reduce(n: int) -> float:
    return 2.0 * (n - 1) / n


def _sharded(n: int) -> float:
    return (n - 1) / n


def _one(n: int) -> float:
    return 1.0


#: nccl-tests bus-bandwidth factors (NVIDIA/nccl-tests doc/PERFORMANCE.md): busbw = algbw * f(n).
BUSBW_FACTORS: Mapping[str, Callable[[int], float]] = MappingProxyType(
    {
        "all_reduce": _all_reduce,
        "all_gather": _sharded,
        "reduce_scatter": _sharded,
        "all_to_all": _sharded,
        "broadcast": _one,
        "reduce": _one,
        "send_recv": _one,
    }
)
