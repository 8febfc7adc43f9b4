"""How long a matmul shape would take, so a budgeted run never starts one it cannot finish.

A shape costs: allocating and seeding its three matrices, `warmup + iterations` products and a
cache flush before each timed one. The rate comes from the device warm-up and then from the
measured shape nearest in FLOPs; allocation and flush costs are timed once on the device.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from flopwise.bench.matmul import MatmulKernel, ShapeResult, matmul_flops
from flopwise.units import TERA

#: Estimates are padded by this factor: timing noise and clock changes between shapes.
ESTIMATE_SAFETY = 1.25
#: The device warm-up may take at most this share of a budget (the rest measures shapes).
WARMUP_BUDGET_SHARE = 0.1


@dataclass(slots=True)
class ShapeTimeEstimator:
    """estimate(shape) -> seconds; fed with each measured shape."""

    iterations: int
    warmup: int
    flush_s: float = 0.0
    alloc_s_per_element: float = 0.0
    rates: list[tuple[float, float]] = field(default_factory=list)  # (flops, FLOP/s)
    groups: int = 1  # products per call: a grouped run (--groups) multiplies G of each shape

    def observe_rate(self, flops: float, seconds: float) -> None:
        if flops > 0 and seconds > 0:
            self.rates.append((flops, flops / seconds))

    def observe(self, result: ShapeResult) -> None:
        if result.status == "ok" and result.median_tflops:
            flops = self.groups * matmul_flops(result.m, result.n, result.k)
            self.rates.append((flops, result.median_tflops * TERA))

    def rate_for(self, flops: float) -> float | None:
        """FLOP/s of the observed shape nearest in FLOPs (log scale)."""
        if not self.rates:
            return None
        return min(self.rates, key=lambda fr: abs(math.log(fr[0] / flops)))[1]

    def __call__(self, shape: tuple[int, int, int]) -> float | None:
        m, n, k = shape
        flops = self.groups * matmul_flops(m, n, k)
        rate = self.rate_for(flops)
        if rate is None:
            return None
        compute = (self.warmup + self.iterations) * flops / rate
        setup = self.alloc_s_per_element * self.groups * (m * k + k * n + m * n)
        return ESTIMATE_SAFETY * (compute + setup + self.iterations * self.flush_s)


def calibrate(
    kernel: MatmulKernel,
    shape: tuple[int, int, int],
    seconds: float,
    estimator: ShapeTimeEstimator,
) -> None:
    """Warm the device up on `shape` for about `seconds` (at least one product), timing the
    allocation, one cache flush and the products so the estimator has costs to work from."""
    m, n, k = shape
    if not kernel.fits(m, n, k):
        return
    start = time.perf_counter()
    a, b, c = kernel.prepare(m, n, k)
    kernel.timer.sync()
    elements = kernel.groups * (m * k + k * n + m * n)
    estimator.alloc_s_per_element = (time.perf_counter() - start) / elements
    kernel.flush_buffer()
    kernel.timer.sync()
    start = time.perf_counter()
    kernel.flush()
    kernel.timer.sync()
    estimator.flush_s = time.perf_counter() - start
    calls = 0
    start = time.perf_counter()
    deadline = start + max(seconds, 0.0)
    while True:
        kernel.run_once(a, b, c)
        kernel.timer.sync()
        calls += 1
        if time.perf_counter() >= deadline:
            break
    estimator.observe_rate(calls * kernel.flops(m, n, k), time.perf_counter() - start)
