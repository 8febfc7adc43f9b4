"""Timing done right: device events where the backend has them, synchronise otherwise.

Each timed iteration is preceded by `before_each` (cache flush, output re-randomisation) which
runs outside the timed window. With events, all iterations are queued and the device is
synchronised once at the end, so host overhead does not leak into the numbers.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flopwise.bench.device import DeviceInfo, synchronize

#: Backends whose torch.Event supports enable_timing/elapsed_time.
EVENT_BACKENDS: tuple[str, ...] = ("cuda", "xpu", "hpu", "mps")


@dataclass(frozen=True, slots=True)
class Timings:
    """Seconds per timed iteration."""

    seconds: tuple[float, ...]

    @property
    def median_s(self) -> float:
        return float(statistics.median(self.seconds))

    @property
    def min_s(self) -> float:
        return min(self.seconds)


class IterationTimer:
    """Times iterations of a callable on one device."""

    def __init__(self, torch: Any, info: DeviceInfo) -> None:
        self.torch = torch
        self.info = info
        self.uses_events = info.type in EVENT_BACKENDS and hasattr(torch, "Event")

    @property
    def method(self) -> str:
        return "device events" if self.uses_events else "synchronise + perf_counter"

    def sync(self) -> None:
        synchronize(self.torch, self.info)

    def time(
        self,
        fn: Callable[[], Any],
        iterations: int,
        before_each: Callable[[], Any] | None = None,
    ) -> Timings:
        if iterations < 1:
            raise ValueError("iterations must be at least 1")
        if self.uses_events:
            try:
                return self._time_events(fn, iterations, before_each)
            except (RuntimeError, NotImplementedError, TypeError):
                self.uses_events = False  # this backend's events cannot time: synchronise
        out: list[float] = []
        for _ in range(iterations):
            if before_each is not None:
                before_each()
            self.sync()
            start = time.perf_counter()
            fn()
            self.sync()
            out.append(time.perf_counter() - start)
        return Timings(tuple(out))

    def _time_events(
        self, fn: Callable[[], Any], iterations: int, before_each: Callable[[], Any] | None
    ) -> Timings:
        ev = self.torch.Event
        pairs = []
        for _ in range(iterations):
            if before_each is not None:
                before_each()
            start, end = ev(enable_timing=True), ev(enable_timing=True)
            start.record()
            fn()
            end.record()
            pairs.append((start, end))
        self.sync()
        # elapsed_time is in milliseconds.
        return Timings(tuple(max(s.elapsed_time(e), 1e-6) / 1e3 for s, e in pairs))


def warm_up(fn: Callable[[], Any], seconds: float, sync: Callable[[], None]) -> int:
    """Run fn repeatedly for about `seconds` so clocks ramp up; returns the number of calls."""
    calls = 0
    deadline = time.perf_counter() + seconds
    while True:
        fn()
        calls += 1
        if calls % 4 == 0:
            sync()
            if time.perf_counter() >= deadline:
                return calls
